// A run's page (/runs/{id}): summary, controls (answer, resume, cancel), the graph with
// the path taken, the timeline, the trace, the accounting by owner, the agents'
// conversations and the last committed state. While the run moves, the page follows its
// events (Server-Sent Events) and redraws without a reload.

import { api, enc } from './api.js';
import { h, replace, badge, when, duration, json, section, problem } from './dom.js';
import { drawGraph } from './graph.js';
import { timeline, callWords } from './timeline.js';

const SETTLED = ['completed', 'stopped', 'failed', 'awaiting_input'];
const CANCELLABLE = ['queued', 'waiting', 'running', 'awaiting_input', 'interrupted'];
const RESUMABLE = ['interrupted', 'failed', 'stopped'];

function number(value) {
  return typeof value === 'number' ? value : 0;
}

function summary(shown, trace) {
  const run = shown.run;
  const usage = shown.usage_total ?? {};
  const tokens = number(usage.input_tokens) + number(usage.output_tokens);
  const times = trace.map((i) => i.at_ms).filter((t) => t > 0);
  const took = times.length ? Math.max(...times) - Math.min(run.created_ms, ...times)
    : run.updated_ms - run.created_ms;
  const rows = [
    ['Status', [badge(run.status), run.cancel_requested ? ' (cancel requested)' : '']],
    run.termination_reason ? ['Reason', run.termination_reason] : null,
    ['Workflow', h('a', { href: `/workflows/${enc(run.workflow)}` }, run.workflow)],
    ['Steps', String(run.steps)],
    ['Duration', duration(took)],
    ['Tokens', tokens ? `${tokens} (${number(usage.input_tokens)} in, ${number(usage.output_tokens)} out)` : '0'],
    ['Cost', usage.cost_usd !== undefined ? `$${Number(usage.cost_usd).toFixed(4)}` : '$0'],
    ['Created', when(run.created_ms)],
    ['Updated', when(run.updated_ms)],
  ].filter(Boolean);
  if (run.owner) rows.push(['Owner', run.owner]);
  if (shown.message) rows.push(['Message', shown.message]);
  const deps = shown.dependencies ?? {};
  if (deps.after?.length) {
    rows.push(['After', deps.after.map((d) => [h('a', { href: `/runs/${enc(d.run_id)}` }, d.run_id), ` (${d.status}) `])]);
  }
  if (deps.dependents?.length) {
    rows.push(['Before', deps.dependents.map((d) => [h('a', { href: `/runs/${enc(d.run_id)}` }, d.run_id), ` (${d.status}) `])]);
  }
  return h('dl', { class: 'summary' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', { 'data-key': k.toLowerCase() }, v)]));
}

/** JSON longer than this many characters is shown cut, with a button showing it all. */
const VALUE_LIMIT = 2000;

/**
 * One value of a step (its input or its writes): a collapsed `<details>` whose summary
 * names the slices, holding the value as pretty-printed JSON, cut at VALUE_LIMIT
 * characters with a button to see it whole.
 */
function valueCell(kind, value, names, unknown) {
  if (value === undefined) {
    if (!names?.length) return '';
    return h('span', { class: 'muted', title: unknown ?? '' }, names.join(', '));
  }
  const text = JSON.stringify(value, null, 2);
  const slices = value && typeof value === 'object' ? Object.keys(value) : [];
  const pre = h('pre', { class: 'json' }, text.length > VALUE_LIMIT ? `${text.slice(0, VALUE_LIMIT)}\u2026` : text);
  const more = text.length > VALUE_LIMIT
    ? h('button', {
      type: 'button',
      class: 'show-all',
      onclick: (e) => { pre.textContent = text; e.target.remove(); },
    }, `Show all ${text.length.toLocaleString()} characters`)
    : null;
  return h('details', { class: `value value-${kind}` },
    h('summary', {}, slices.length ? slices.join(', ') : '(nothing)'), pre, more);
}

/** The trace kinds that record a node run reading its input (`values.input`). */
const NODE_RUNS = ['dispatch', 'handoff', 'advisor', 'team_turn'];

function traceTable(trace, doc) {
  if (!trace.length) return h('p', { class: 'muted' }, 'No step yet.');
  const nodes = doc?.nodes ?? {};
  return h('table', { class: 'trace' },
    h('caption', {}, 'Each item of the decision trace; a node run (a dispatch, handoff, advisor or team turn, at any depth) shows the slices it read (its input, as they were when it ran: after any answer, call or join before it) and what it wrote. Open one to see its value.'),
    h('thead', {}, h('tr', {}, ['#', 'Step', 'Kind', 'From', 'To', 'Input', 'Writes', 'Why', 'Time']
      .map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, trace.map((item, i) => {
      const node = nodes[NODE_RUNS.includes(item.kind) ? item.target : null];
      const values = item.values ?? {};
      return h('tr', { 'data-kind': item.kind, 'data-index': i },
        h('td', { class: 'num' }, i),
        h('td', { class: 'num' }, item.step),
        h('td', {}, item.kind),
        h('td', {}, item.source ?? item.supervisor ?? ''),
        h('td', {}, item.target ?? ''),
        h('td', { class: 'input' }, valueCell('input', values.input, node?.reads, values.input_unknown)),
        h('td', { class: 'writes' }, valueCell('writes', values.writes, node?.writes, values.writes_unknown)),
        h('td', {}, [callWords(item) ?? item.reason ?? '', item.termination_reason ? ` (${item.termination_reason})` : '']),
        h('td', { class: 'num' }, item.duration_us ? duration(item.duration_us / 1000) : ''));
    })));
}

function accountingTable(accounting) {
  const owners = accounting?.by_owner ?? {};
  const names = Object.keys(owners);
  if (!names.length) return h('p', { class: 'muted' }, 'Nothing accounted yet.');
  const keys = [...new Set(names.flatMap((n) => Object.keys(owners[n] ?? {})))].sort();
  const cell = (v) => (typeof v === 'number' ? String(Math.round(v * 10000) / 10000) : JSON.stringify(v ?? ''));
  return h('table', { class: 'accounting' },
    h('caption', {}, 'Usage rolled up to the node that owns each answer'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Owner'), keys.map((k) => h('th', { scope: 'col' }, k)))),
    h('tbody', {}, names.map((n) => h('tr', {}, h('th', { scope: 'row' }, n),
      keys.map((k) => h('td', { class: 'num' }, cell(owners[n][k])))))),
    accounting.total ? h('tfoot', {}, h('tr', {}, h('th', { scope: 'row' }, 'total'),
      keys.map((k) => h('td', { class: 'num' }, cell(accounting.total[k]))))) : null);
}

function content(value) {
  if (typeof value === 'string') return h('p', { class: 'text' }, value);
  return json(value);
}

function conversations(messages) {
  const sessions = messages?.sessions ?? [];
  if (!sessions.length) {
    return h('p', { class: 'muted' }, messages?.note ?? 'No agent conversation in this run.');
  }
  return sessions.map((s, i) => {
    const title = s.node ?? s.agent ?? s.id ?? `session ${i + 1}`;
    const list = s.messages ?? s.conversation ?? [];
    return h('article', { class: 'session' }, h('h3', {}, title),
      h('ol', { class: 'messages' }, list.map((m) => h('li', { class: `msg msg-${m.role ?? 'other'}` },
        h('strong', {}, m.role ?? 'message'), ' ',
        m.content !== undefined ? content(m.content) : json(m),
        m.tool_calls ? json(m.tool_calls) : null))));
  });
}

function stateView(state) {
  if (state === null || typeof state !== 'object') return h('p', { class: 'muted' }, 'No state.');
  const { system, ...slices } = state;
  return [json(slices), system === undefined ? null
    : h('details', {}, h('summary', {}, 'The runtime\'s own part (system: budgets, call stack, trace)'), json(system))];
}

/** Renders run `id`'s page into `main`; returns a function that stops following it. */
export async function runPage(main, id) {
  const title = h('h1', {}, 'Run ', h('span', { class: 'mono' }, id));
  const boxes = {
    summary: h('div', {}),
    controls: h('div', {}),
    graph: h('div', { class: 'graph-box' }, h('p', { class: 'muted' }, 'Drawing…')),
    timeline: h('div', {}),
    trace: h('div', { class: 'scroll' }),
    accounting: h('div', { class: 'scroll' }),
    messages: h('div', {}),
    state: h('div', {}),
  };
  const live = h('p', { id: 'live', class: 'muted', role: 'status', 'aria-live': 'polite' });
  const said = h('p', { id: 'said', role: 'status', 'aria-live': 'polite' });
  // A streaming model's reply as it arrives (model_delta events), until its step lands.
  const growing = h('p', { id: 'growing', class: 'text growing', hidden: true });
  replace(main, title, live,
    h('div', { class: 'overview' },
      h('div', {},
        section('summary', 'Summary', boxes.summary),
        section('controls', 'Controls', boxes.controls, said)),
      section('graph', 'Graph and path taken', h('p', { class: 'muted' },
        'The path is drawn in red; the numbers on an edge are the steps that took it.'), boxes.graph)),
    section('timeline', 'Timeline', boxes.timeline),
    section('trace', 'Trace', boxes.trace),
    section('accounting', 'Accounting by owner', boxes.accounting),
    section('conversations', 'Conversations', growing, boxes.messages),
    section('state', 'Last committed state', boxes.state));

  let shown = null;
  let doc = null;
  let drawnSteps = -1;
  let controlsKey = '';
  let events = null;
  let lastSeq = 0;
  let stopped = false;
  let pending = null;

  const act = async (what, path, body) => {
    said.textContent = `${what}…`;
    try {
      const answer = await api(path, { method: 'POST', body });
      said.textContent = `${what}: the run is ${answer.status}${answer.cancel_requested ? ' (it stops at its next step)' : ''}.`;
      controlsKey = '';
      // The store may still show the old status for a moment (a resumed run is claimed
      // before it moves): read again until it changed, then follow the run's events.
      const before = shown ? `${shown.run.status}|${shown.run.steps}|${shown.run.cancel_requested}` : '';
      for (let i = 0; i < 40; i += 1) {
        await refresh();
        const now = shown ? `${shown.run.status}|${shown.run.steps}|${shown.run.cancel_requested}` : '';
        if (now !== before || events) break;
        await new Promise((resolve) => { setTimeout(resolve, 250); });
      }
      follow();
    } catch (error) {
      replace(said, problem(error));
    }
  };

  const controls = (run, question) => {
    const parts = [];
    if (run.status === 'awaiting_input') {
      parts.push(h('form', { class: 'answer', 'aria-label': 'Answer the question',
        onsubmit: (e) => {
          e.preventDefault();
          const text = e.target.elements.answer.value;
          act('Answering', `/api/runs/${enc(id)}/resume`, { answer: text });
        } },
      h('p', { class: 'question' }, h('strong', {}, 'The run asks: '), question ?? ''),
      h('label', { for: 'answer' }, 'Your answer'),
      h('textarea', { id: 'answer', name: 'answer', rows: 3, required: true }),
      h('button', { type: 'submit' }, 'Send answer and resume')));
    }
    const buttons = [];
    if (RESUMABLE.includes(run.status)) {
      buttons.push(h('button', { type: 'button', onclick: () => act('Resuming', `/api/runs/${enc(id)}/resume`, {}) }, 'Resume'));
    }
    if (CANCELLABLE.includes(run.status) && !run.cancel_requested) {
      buttons.push(h('button', { type: 'button', class: 'danger',
        onclick: () => act('Cancelling', `/api/runs/${enc(id)}/cancel`, undefined) }, 'Cancel run'));
    }
    if (buttons.length) parts.push(h('p', { class: 'buttons' }, buttons));
    if (!parts.length) parts.push(h('p', { class: 'muted' }, `Nothing to do: the run is ${run.status}.`));
    return parts;
  };

  const refresh = async () => {
    try {
      // The summary first, the rest after it: read together, a run that ends in between
      // could show `completed` beside an older trace, and a settled run is not read again.
      // Read after the summary, they are at least as new as it.
      const s = await api(`/api/runs/${enc(id)}`);
      const [trace, messages, state] = await Promise.all([
        api(`/api/runs/${enc(id)}/trace?values=true`),
        api(`/api/runs/${enc(id)}/messages`).catch(() => null),
        api(`/api/runs/${enc(id)}/state`).catch(() => null),
      ]);
      shown = s;
      const run = s.run;
      document.title = `${run.name ?? run.run_id} · ${run.status} · pactgraph`;
      replace(title, 'Run ', h('span', { class: 'mono' }, run.name ? `${run.name} (${run.run_id})` : run.run_id), ' ', badge(run.status));
      if (!doc) {
        doc = await api(`/api/workflows/${enc(run.workflow)}`).then((w) => w.document).catch(() => null);
      }
      replace(boxes.summary, summary(s, trace));
      const key = `${run.status}|${run.cancel_requested}|${s.question ?? ''}`;
      if (key !== controlsKey) {
        controlsKey = key;
        replace(boxes.controls, controls(run, s.question));
      }
      replace(boxes.timeline, timeline(trace));
      replace(boxes.trace, traceTable(trace, doc));
      replace(boxes.accounting, accountingTable(s.accounting));
      replace(boxes.messages, conversations(messages));
      replace(boxes.state, stateView(state));
      if (run.steps !== drawnSteps || drawnSteps < 0) {
        drawnSteps = run.steps;
        await drawGraph(boxes.graph, run.workflow, run.run_id);
      }
    } catch (error) {
      replace(boxes.summary, problem(error));
    }
  };

  const schedule = () => {
    if (pending) return;
    pending = setTimeout(async () => { pending = null; await refresh(); }, 150);
  };

  const settled = () => shown && SETTLED.includes(shown.run.status);

  const showLive = () => {
    const status = shown?.run.status ?? 'unknown';
    if (events) live.textContent = `Live: following the run's events (last event ${lastSeq}).`;
    else if (status === 'awaiting_input') live.textContent = 'Paused: the run waits for an answer (below).';
    else live.textContent = `Not following: the run is ${status}${lastSeq ? ` (last event ${lastSeq})` : ''}.`;
  };

  function follow() {
    if (stopped || events || settled()) { showLive(); return; }
    events = new EventSource(`/api/runs/${enc(id)}/events`);
    events.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch { return; }
      if (event.event === 'model_delta') {
        // Live only (never stored): shown growing, without reading the run again.
        if (event.tool_call === undefined) {
          const head = `${event.node} (turn ${event.turn}) is answering: `;
          const text = growing.dataset.node === `${event.node}#${event.turn}` ? growing.dataset.text : '';
          growing.dataset.node = `${event.node}#${event.turn}`;
          growing.dataset.text = text + event.text;
          growing.textContent = head + growing.dataset.text;
          growing.hidden = false;
        }
        return;
      }
      if (event.seq <= lastSeq) return;
      if (event.event === 'step' && event.item?.kind === 'model_call') {
        growing.hidden = true;
        growing.dataset.node = '';
      }
      lastSeq = Math.max(lastSeq, event.seq);
      showLive();
      schedule();
      if (event.event === 'run_ended' || event.event === 'paused') {
        events.close();
        events = null;
        setTimeout(async () => { await refresh(); showLive(); }, 200);
      }
    };
    events.onerror = () => {
      // The server ends the stream once the run has settled; otherwise follow again.
      if (events) events.close();
      events = null;
      setTimeout(async () => { await refresh(); follow(); }, 1000);
    };
    showLive();
  }

  await refresh();
  follow();
  return () => { stopped = true; if (events) events.close(); clearTimeout(pending); };
}
