// Graphs: the server's DOT laid out by Graphviz in the browser (@viz-js/viz, a WASM
// build embedded in the binary, loaded on the first page that draws a graph) and put in
// the page as inline SVG.

import { apiText, enc } from './api.js';
import { h, replace, problem } from './dom.js';

/** The colour the server's DOT paints a run's path with (visualize/dot.rs `TAKEN`). */
export const TAKEN = '#d62728';

let viz = null;

function loadViz() {
  if (viz) return viz;
  viz = new Promise((resolve, reject) => {
    if (globalThis.Viz) {
      resolve(globalThis.Viz.instance());
      return;
    }
    const script = document.createElement('script');
    script.src = '/ui/viz-global.js';
    script.onload = () => resolve(globalThis.Viz.instance());
    script.onerror = () => reject(new Error('the Graphviz script could not be loaded'));
    document.head.append(script);
  });
  return viz;
}

/**
 * Draws workflow `name`'s graph (with run `run`'s path when given) into `box`. The SVG
 * carries `data-run` and, when a path is drawn, `data-path-edges`: how many edges are in
 * the path's colour.
 */
export async function drawGraph(box, name, run) {
  const query = run ? `?run=${enc(run)}` : '';
  try {
    const [dot, graphviz] = await Promise.all([
      apiText(`/api/workflows/${enc(name)}/graph.dot${query}`),
      loadViz(),
    ]);
    const svg = graphviz.renderSVGElement(dot);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', run
      ? `The graph of workflow ${name} with the path run ${run} took, numbered by step`
      : `The graph of workflow ${name}`);
    svg.classList.add('graph');
    if (run) {
      svg.dataset.run = run;
      const taken = [...svg.querySelectorAll('g.edge path')]
        .filter((p) => (p.getAttribute('stroke') || '').toLowerCase() === TAKEN);
      for (const p of taken) p.closest('g.edge').classList.add('taken');
      svg.dataset.pathEdges = String(taken.length);
    }
    replace(box, svg);
  } catch (error) {
    replace(box, problem(error),
      h('p', {}, 'The server can also draw it: ',
        h('a', { href: `/api/workflows/${enc(name)}/graph.svg${query}` }, 'graph.svg'),
        ' (needs Graphviz on the server).'));
  }
}
