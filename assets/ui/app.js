// The pactgraph web UI: reads the page from the URL and renders it. Every link is a
// plain `<a href>`, so each page (a run's page holds its id) can be bookmarked, opened in
// a new tab and reached with the keyboard.

import { h, replace, problem } from './dom.js';
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { workflowsPage, workflowPage } from './workflows.js';

async function route(main) {
  const parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const nav = parts[0] === 'workflows' ? 'workflows' : 'runs';
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (parts.length === 0 || (parts[0] === 'runs' && parts.length === 1)) {
    document.title = 'Runs · pactgraph';
    return runsPage(main);
  }
  if (parts[0] === 'runs' && parts.length === 2) {
    document.title = `Run ${parts[1]} · pactgraph`;
    return runPage(main, parts[1]);
  }
  if (parts[0] === 'workflows' && parts.length === 1) {
    document.title = 'Workflows · pactgraph';
    return workflowsPage(main);
  }
  if (parts[0] === 'workflows' && parts.length === 2) {
    document.title = `Workflow ${parts[1]} · pactgraph`;
    return workflowPage(main, parts[1]);
  }
  replace(main, h('h1', {}, 'Not found'), h('p', {}, 'No such page. ', h('a', { href: '/' }, 'The runs')));
  return null;
}

const main = document.getElementById('main');
route(main)
  .then(() => { document.body.dataset.ready = 'true'; })
  .catch((error) => {
    replace(main, h('h1', {}, 'Something went wrong'), problem(error));
    document.body.dataset.ready = 'error';
  });
