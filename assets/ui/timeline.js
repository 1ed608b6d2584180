// The timeline: a bar per node run, model call and tool call of a run's trace, placed
// by time; bars that overlap in time (advisors, a team's members, tool calls run at
// once) go side by side on separate lanes.
//
// How the trace is read (ADR 0088): an item's `at_ms` is when its step was planned, so
// every item of a step has the same one, and `duration_us` is how long its call ran. A
// bar starts when its step could begin: at its `at_ms`, but never before the bar before
// it ended (steps run one after another; a retried attempt follows the failed one);
// members of one fork (a step's advisors, a team cycle's turns, one reply's tool calls)
// start together, and a team node's run is its lead's final turn.

import { h, duration } from './dom.js';

const LANE_PX = 30;

/**
 * A `model_call` or `tool_call` item's fields in words (`null` for other items, and for
 * call items stored before they had fields: their `reason` says it).
 */
export function callWords(item) {
  const m = item.model_call;
  if (m) {
    const parts = [`turn ${m.turn}`, `attempt ${m.attempt}`];
    if (m.failed_attempts?.length) {
      parts.push(`after ${m.failed_attempts.length} failed HTTP attempt(s): `
        + m.failed_attempts.map((a) => a.error).join('; '));
    }
    parts.push(m.error ? `failed: ${m.error}` : `finish_reason ${m.finish_reason ?? 'none'}`);
    const u = item.usage ?? {};
    if (!m.usage_known) parts.push('usage unknown');
    else if (u.input_tokens !== undefined) {
      parts.push(`${u.input_tokens} in / ${u.output_tokens ?? 0} out tokens`
        + (u.cost_usd !== undefined ? `, $${Number(u.cost_usd).toFixed(6)}` : ''));
    }
    return parts.join(', ');
  }
  const t = item.tool_call;
  if (t) {
    return `call ${t.call_id} (#${t.index}) of ${t.caller}: ${t.status}${t.error ? `: ${t.error}` : ''}`;
  }
  return null;
}

/** What a trace item is on the timeline (`null`: not a bar). */
export function barOf(item, index) {
  const kinds = { model_call: 'model', tool_call: 'tool', advisor: 'advisor', team_turn: 'team' };
  let kind = kinds[item.kind];
  let label;
  if (kind === 'model') {
    label = `${item.source ?? '?'} → ${item.target ?? 'model'}`;
    if (item.model_call) label += ` #${item.model_call.turn}`;
  } else if (kind) label = item.target ?? '?';
  else if (item.usage !== undefined || item.duration_us > 0) {
    kind = 'node';
    label = item.kind === 'return' || item.kind === 'handoff'
      ? (item.source ?? item.target ?? '?') : (item.target ?? item.source ?? '?');
  } else {
    return null;
  }
  return {
    index, kind, label, at: item.at_ms, length: (item.duration_us ?? 0) / 1000,
    source: item.source, target: item.target, step: item.step,
    reason: callWords(item) ?? item.reason ?? '',
  };
}

/** Kinds whose consecutive bars of one step run at once. */
const FORKED = new Set(['advisor', 'team', 'tool']);

/**
 * Whether `bar` started together with `before`, the bar before it: members of one fork
 * (consecutive advisor, team-turn or tool-call bars planned in the same step), or a team
 * node's run right after its lead's final turn (the same call, recorded twice).
 */
function together(before, bar) {
  if (!before || before.at !== bar.at) return false;
  if (FORKED.has(bar.kind)) return before.kind === bar.kind;
  return bar.kind === 'node' && before.kind === 'team' && before.source === bar.target;
}

/**
 * Places the bars (in trace order) in time: `start` and `end` in ms since the epoch. A
 * bar starts at its step's `at_ms`, or when the bar before it ended if that is later,
 * or with the bar before it when they are of one fork (see `together`).
 */
export function place(bars) {
  let before = null;
  let ended = -Infinity;
  for (const bar of bars) {
    bar.start = together(before, bar) ? before.start : Math.max(bar.at, ended);
    bar.end = bar.start + bar.length;
    ended = Math.max(ended, bar.end);
    before = bar;
  }
  return bars;
}

/** Gives each bar a lane: the first whose last bar ended before this one starts. */
export function lanes(bars) {
  const ends = [];
  for (const bar of [...bars].sort((a, b) => a.start - b.start || a.index - b.index)) {
    let lane = ends.findIndex((end) => end <= bar.start);
    if (lane < 0) { lane = ends.length; ends.push(bar.end); } else { ends[lane] = bar.end; }
    bar.lane = lane;
  }
  return ends.length;
}

/** The timeline of `trace` (an element). */
export function timeline(trace) {
  const bars = place(trace.map(barOf).filter(Boolean));
  if (!bars.length) {
    return h('p', { class: 'muted' }, 'No node run yet.');
  }
  const count = lanes(bars);
  const t0 = Math.min(...bars.map((b) => b.start));
  const t1 = Math.max(...bars.map((b) => b.end));
  const span = Math.max(t1 - t0, 1);
  const list = h('ol', { class: 'timeline', style: null });
  list.dataset.lanes = String(count);
  for (const bar of bars) {
    const left = ((bar.start - t0) / span) * 100;
    const width = Math.max(((bar.end - bar.start) / span) * 100, 0.5);
    const text = `${bar.label} (${bar.kind}, step ${bar.step}): ${duration(bar.end - bar.start)}`;
    const li = h('li', { class: `bar bar-${bar.kind}`, title: bar.reason ? `${text}. ${bar.reason}` : text },
      h('span', {}, text));
    // A narrow bar's label goes beside it, on the side with room.
    if (width < 15) li.classList.add('narrow', left > 50 ? 'label-before' : 'label-after');
    li.dataset.lane = String(bar.lane);
    li.dataset.kind = bar.kind;
    // Where it is in time (ms from the first bar's start), for tests and tools.
    li.dataset.start = (bar.start - t0).toFixed(3);
    li.dataset.end = (bar.end - t0).toFixed(3);
    // Placed with the CSSOM (no style attribute: the page's policy allows no inline style).
    li.style.left = `${left}%`;
    li.style.width = `${Math.min(width, 100 - left)}%`;
    li.style.top = `${bar.lane * LANE_PX}px`;
    list.append(li);
  }
  list.style.height = `${count * LANE_PX}px`;
  return h('figure', { class: 'timeline-box' }, list,
    h('figcaption', {}, `${bars.length} bars over ${duration(span)}`,
      count > 1 ? `, at most ${count} at once` : '',
      '. Node runs, model calls, tool calls, advisors and team turns; overlapping ones side by side.'));
}
