// The workflows: the documents under --workflows with their diagnostics (/workflows),
// and one document with its graph, its diagnostics and a form to start a run
// (/workflows/{name}).

import { api, enc } from './api.js';
import { h, replace, json, section, problem } from './dom.js';
import { drawGraph } from './graph.js';

function diagnostics(list) {
  if (!list?.length) return h('p', { class: 'ok' }, 'No diagnostics: the document is valid.');
  return h('ul', { class: 'diagnostics' }, list.map((d) => h('li', { class: `diag diag-${d.severity ?? 'error'}` },
    h('strong', {}, d.severity ?? 'error'), ' ', h('code', {}, d.code ?? ''), ' ',
    d.pointer ? h('code', { class: 'pointer' }, d.pointer) : null, ' ', d.message ?? '',
    d.fix ? h('span', { class: 'fix' }, ` Fix: ${typeof d.fix === 'string' ? d.fix : JSON.stringify(d.fix)}`) : null)));
}

/** The list of workflows. */
export async function workflowsPage(main) {
  const list = await api('/api/workflows');
  replace(main, h('h1', {}, 'Workflows'),
    list.length ? h('table', { class: 'workflows' },
      h('caption', {}, 'The documents under --workflows'),
      h('thead', {}, h('tr', {}, ['Workflow', 'File', 'Valid', 'Diagnostics'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, list.map((w) => h('tr', { 'data-workflow': w.name ?? '' },
        h('td', {}, w.name ? h('a', { href: `/workflows/${enc(w.name)}` }, w.name) : h('em', {}, 'no name')),
        h('td', {}, h('code', {}, w.file ?? '')),
        h('td', {}, w.valid ? 'yes' : h('strong', { class: 'bad' }, 'no')),
        h('td', {}, diagnostics(w.diagnostics))))))
      : h('p', {}, 'No workflow documents under --workflows.'));
}

/** One workflow. */
export async function workflowPage(main, name) {
  const w = await api(`/api/workflows/${enc(name)}`);
  const graph = h('div', { class: 'graph-box' }, h('p', { class: 'muted' }, 'Drawing…'));
  const said = h('p', { role: 'status', 'aria-live': 'polite' });
  const start = h('form', { class: 'start', 'aria-label': 'Start a run',
    onsubmit: async (e) => {
      e.preventDefault();
      const f = e.target.elements;
      let input;
      try { input = JSON.parse(f.input.value || '{}'); } catch (error) {
        replace(said, problem(`The input is not JSON: ${error.message}`));
        f.input.focus();
        return;
      }
      const body = { workflow: name, input };
      if (f.name.value.trim()) body.name = f.name.value.trim();
      try {
        const made = await api('/api/runs', { method: 'POST', body });
        location.assign(`/runs/${enc(made.run_id)}`);
      } catch (error) {
        replace(said, problem(error), error.body?.error?.diagnostics ? diagnostics(error.body.error.diagnostics) : null);
      }
    } },
  h('label', { for: 'run-input' }, 'Input (JSON)'),
  h('textarea', { id: 'run-input', name: 'input', rows: 4, spellcheck: 'false' }, '{}'),
  h('label', { for: 'run-name' }, 'Name (optional)'),
  h('input', { id: 'run-name', name: 'name', type: 'text' }),
  h('button', { type: 'submit', disabled: !w.valid }, 'Start a run'),
  h('p', { class: 'muted' }, 'The run is queued; a worker (serve --workers N, or pactgraph worker) runs it.'));
  replace(main, h('h1', {}, 'Workflow ', h('span', { class: 'mono' }, name)),
    h('p', {}, 'File ', h('code', {}, w.file ?? ''), w.valid ? ', valid.' : ', not valid.', ' ',
      h('a', { href: `/?workflow=${enc(name)}` }, 'Its runs')),
    section('diagnostics', 'Diagnostics', diagnostics(w.diagnostics)),
    section('graph', 'Graph', graph),
    section('start', 'Start a run', start, said),
    section('document', 'Document', h('details', {}, h('summary', {}, 'The document as JSON'), json(w.document))));
  if (w.valid) await drawGraph(graph, name, null);
  else replace(graph, h('p', { class: 'muted' }, 'An invalid document has no graph.'));
}
