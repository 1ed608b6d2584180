// The runs list: filters by status and workflow (a GET form, so a filtered list has its
// own URL), each run a link to its page, statuses refreshed every two seconds.

import { api, enc } from './api.js';
import { h, replace, badge, when, problem } from './dom.js';

const STATUSES = ['queued', 'waiting', 'running', 'interrupted', 'awaiting_input',
  'completed', 'stopped', 'failed'];
const REFRESH_MS = 2000;

function filterForm(params, workflows) {
  const status = params.get('status') ?? '';
  const workflow = params.get('workflow') ?? '';
  const names = new Set(workflows.map((w) => w.name).filter(Boolean));
  if (workflow) names.add(workflow);
  return h('form', { class: 'filters', method: 'get', action: '/', role: 'search',
    'aria-label': 'Filter the runs' },
  h('label', { for: 'f-status' }, 'Status'),
  h('select', { id: 'f-status', name: 'status' },
    h('option', { value: '' }, 'any'),
    STATUSES.map((s) => h('option', { value: s, selected: s === status }, s))),
  h('label', { for: 'f-workflow' }, 'Workflow'),
  h('select', { id: 'f-workflow', name: 'workflow' },
    h('option', { value: '' }, 'any'),
    [...names].sort().map((n) => h('option', { value: n, selected: n === workflow }, n))),
  h('button', { type: 'submit' }, 'Filter'),
  (status || workflow) ? h('a', { href: '/' }, 'Clear') : null);
}

function row(run) {
  return h('tr', { 'data-run': run.run_id, 'data-status': run.status },
    h('td', {}, h('a', { href: `/runs/${enc(run.run_id)}`, class: 'mono' }, run.run_id)),
    h('td', {}, run.name ?? ''),
    h('td', {}, h('a', { href: `/workflows/${enc(run.workflow)}` }, run.workflow)),
    h('td', {}, badge(run.status),
      run.termination_reason && run.termination_reason !== run.status
        ? h('span', { class: 'reason' }, ` ${run.termination_reason}`) : null),
    h('td', { class: 'num' }, run.steps),
    h('td', {}, when(run.created_ms)),
    h('td', {}, when(run.updated_ms)),
    h('td', {}, run.waits_on ?? ''));
}

/** Renders the runs page into `main`; returns a function that stops its refreshing. */
export async function runsPage(main) {
  const params = new URLSearchParams(location.search);
  const query = new URLSearchParams();
  for (const key of ['status', 'workflow', 'before']) {
    if (params.get(key)) query.set(key, params.get(key));
  }
  const workflows = await api('/api/workflows').catch(() => []);
  const body = h('tbody', {});
  const table = h('table', { class: 'runs' },
    h('caption', {}, 'Runs, newest first'),
    h('thead', {}, h('tr', {},
      ['Run', 'Name', 'Workflow', 'Status', 'Steps', 'Created', 'Updated', 'Waits on']
        .map((t) => h('th', { scope: 'col' }, t)))),
    body);
  const note = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const more = h('p', {});
  replace(main, h('h1', {}, 'Runs'), filterForm(params, workflows), table, more, note);

  let timer = null;
  let stopped = false;
  const load = async () => {
    try {
      const page = await api(`/api/runs?${query}`);
      replace(body, page.runs.length ? page.runs.map(row)
        : h('tr', {}, h('td', { colspan: 8 }, 'No runs yet. Start one from a workflow\'s page or with ',
          h('code', {}, 'POST /api/runs'), '.')));
      if (page.next_before) {
        const next = new URLSearchParams(query);
        next.set('before', page.next_before);
        replace(more, h('a', { href: `/?${next}` }, 'Older runs'));
      } else {
        replace(more);
      }
      note.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshed every ${REFRESH_MS / 1000} s.`;
    } catch (error) {
      replace(note, problem(error));
    }
    if (!stopped) timer = setTimeout(load, REFRESH_MS);
  };
  await load();
  return () => { stopped = true; clearTimeout(timer); };
}
