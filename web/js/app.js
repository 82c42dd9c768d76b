// The controller's web UI: sign in with a token, then watch the network
// live (topology map, link and transfer throughput, alerts), book
// bandwidth, watch every link's timeline and manage your reservations,
// kept current by the event streams. See docs/controller.md for the API it speaks.

import { api, clearToken, errorText, getToken, onUnauthorized, setToken } from './api.js';
import { Dashboard } from './dashboard.js';
import { show } from './dom.js';
import { Events } from './events.js';
import { ReserveForm } from './reserve.js';
import { Reservations } from './reservations.js';
import { Timeline } from './timeline.js';

const $ = (id) => document.getElementById(id);

// Timed changes (a reservation starting or ending) and the moving "now"
// are picked up at least this often even without events.
const POLL_MS = 60000;

const ui = {
  auth: $('auth'),
  token: $('token'),
  signOut: $('sign-out'),
  whoami: $('whoami'),
  message: $('auth-message'),
  help: $('signin-help'),
  tokenFile: $('admin-token-file'),
  app: $('app'),
};

const timeline = new Timeline({
  root: $('timeline'), range: $('range'), showIdle: $('show-idle'),
  refreshButton: $('timeline-refresh'), status: $('timeline-status'),
});
const reservations = new Reservations({
  table: $('my-reservations'), stateFilter: $('state-filter'), everyone: $('everyone'),
  everyoneLabel: $('everyone-label'), status: $('reservations-status'), onChange: refreshSoon,
});
const form = new ReserveForm({ form: $('reserve-form'), onBooked: refreshSoon });
// The token may have been revoked when a stream is refused: go on retrying
// only while it is good.
async function tokenStillGood() {
  try {
    await api('GET', 'api/v1/whoami');
    return true;
  } catch {
    return false; // a 401 has signed out; anything else: the poll carries on
  }
}

const dashboard = new Dashboard({
  map: $('topomap'), charts: $('link-charts'), showIdleCharts: $('show-idle-charts'), idleChartsCount: $('idle-charts-count'),
  liveStatus: $('metrics-status'),
  transfersTable: $('transfers'), transferPage: $('transfer-page'), transfersStatus: $('transfers-status'),
  jobs: { table: $('jobs'), page: $('job-page'), status: $('jobs-status'), totals: $('jobs-totals'), chart: $('jobs-chart') },
  alertsPanel: $('alerts-panel'), alerts: $('alerts'), alertsStatus: $('alerts-status'),
  onClosed: tokenStillGood,
});
const events = new Events({
  status: $('live-status'),
  onEvent: (kind) => {
    if (kind !== 'exclusive') refreshSoon();
  },
  onClosed: tokenStillGood,
});

let pollTimer = 0;
let soonTimer = 0;

// refreshSoon refreshes the timeline and the list once for a burst of
// changes (one booking sends several events).
function refreshSoon() {
  clearTimeout(soonTimer);
  soonTimer = setTimeout(refreshAll, 150);
}

function refreshAll() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(refreshAll, POLL_MS);
  return Promise.all([timeline.refresh(), reservations.refresh()]);
}

async function signIn(token) {
  show(ui.message, '');
  let who;
  try {
    who = await api('GET', 'api/v1/whoami', undefined, { token });
  } catch (err) {
    signOut();
    if (err.status === 401) {
      show(ui.message, `The controller refused this token (${err.message}). Check that you pasted all of it, ` +
        'or ask an admin for a new one (lightpath user token create NAME).', 'error');
    } else {
      show(ui.message, `Cannot sign in: ${errorText(err)}`, 'error');
    }
    ui.token.focus();
    return;
  }
  setToken(token);
  ui.token.value = '';
  ui.token.placeholder = 'signed in';
  ui.signOut.hidden = false;
  ui.help.hidden = true;
  const projects = who.projects?.length ? ` · projects ${who.projects.join(', ')}` : '';
  ui.whoami.textContent = `${who.user} (${who.role})${projects}`;
  ui.whoami.title = `signed in as ${who.user}`;
  reservations.setUser(who);
  ui.app.hidden = false;
  let topo = null;
  try {
    topo = await api('GET', 'api/v1/topology');
    form.setNodes(topo, who.projects);
    timeline.setContext(topo, who.user);
  } catch (err) {
    show(ui.message, `Cannot load the topology: ${errorText(err)}`, 'error');
  }
  events.start(token);
  dashboard.start(token, topo);
  await refreshAll();
}

function signOut() {
  clearToken();
  events.stop();
  dashboard.stop();
  clearTimeout(pollTimer);
  timeline.clear();
  ui.app.hidden = true;
  ui.signOut.hidden = true;
  ui.whoami.textContent = '';
  ui.token.placeholder = 'paste your token';
  ui.help.hidden = false;
}

// showTokenFile names the admin token file on the sign-in page, as the
// controller tells it (GET api/v1/signin needs no token).
async function showTokenFile() {
  try {
    const hint = await api('GET', 'api/v1/signin', undefined, { token: '' });
    if (hint.admin_token_file) {
      ui.tokenFile.textContent = '';
      ui.tokenFile.append(' (here ', Object.assign(document.createElement('code'), { textContent: hint.admin_token_file }), ')');
    }
  } catch {
    // An older controller: the page says where to look without it.
  }
}

// signInByLink exchanges the code of a sign-in link (#/signin?code=...)
// for a session token, once; the code leaves the address bar at once.
async function signInByLink(code) {
  history.replaceState(null, '', location.pathname + location.search);
  let res;
  try {
    res = await api('POST', 'api/v1/signin', { code }, { token: '' });
  } catch (err) {
    show(ui.message, err.status === 401
      ? 'This sign-in link was used already or has expired (it works once, within 10 minutes of the controller\'s start): ' +
        'paste a token instead, as said below.'
      : `Cannot sign in with the link: ${errorText(err)}`, 'error');
    ui.token.focus();
    return;
  }
  signIn(res.token);
}

onUnauthorized((err) => {
  if (!getToken()) return;
  signOut();
  show(ui.message, `Your token is no longer accepted (${err.message}): enter a valid one to go on.`, 'error');
  ui.token.focus();
});

ui.auth.addEventListener('submit', (e) => {
  e.preventDefault();
  const token = ui.token.value.trim();
  if (!token) {
    show(ui.message, 'Paste an API token first: the admin token is in the file given to --admin-token-file.', 'error');
    ui.token.focus();
    return;
  }
  signIn(token);
});

ui.signOut.addEventListener('click', () => {
  signOut();
  show(ui.message, 'Signed out.', 'info');
});

// signInLink starts a sign-in by the link in the address, if it is one.
function signInLink() {
  const link = /^#\/signin\?code=([0-9A-Za-z]+)$/.exec(location.hash);
  if (link) signInByLink(link[1]);
  return link !== null;
}

// A link opened in a tab already on this page changes only the hash.
window.addEventListener('hashchange', signInLink);

showTokenFile();
const saved = getToken();
if (!signInLink()) {
  if (saved) signIn(saved);
  else ui.token.focus();
}
