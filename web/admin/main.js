// The admin UI: login, six tabs by task (Show: the live grid of lines and crew; Lines: groups,
// positions, join links and the rooms' audio; Crew: who is connected, bans; Sound card: device,
// channel names, server audio users, AES67; Streams: WHIP and WHEP; System: stats, nodes, the
// show report, logs), an "unreachable" banner, logout. Plain ES modules, no build step; served
// by control at /admin, talking to /api/admin on the same origin. The tab is in the address (`/admin#crew`),
// each tab chosen is a step of the browser's history (Back returns to the tab before).
//
// Refresh rules: the stats (the chart keeps sampling on every tab) and the visible tab are
// fetched again on every live event (live.js: the server's event stream) and every 3 s
// whatever happens, and written into the page in place (keyed rows, text only where it
// changed); a form with focus or unsaved input is never overwritten. The Show tab also takes
// each event as it comes (show.js), so a talk lights its cell without a fetch.

import { initTheme } from '/common/theme.js';
import { ApiError, Unreachable, api, on, token } from '/admin/api.js';
import { setText, showError } from '/admin/dom.js';
import { $, elements } from '/admin/tab.js';
import * as aes67 from '/admin/aes67.js';
import * as groups from '/admin/groups.js';
import * as positions from '/admin/positions.js';
import * as show from '/admin/show.js';
import * as soundcard from '/admin/soundcard.js';
import * as streams from '/admin/streams.js';
import * as users from '/admin/users.js';
import * as stats from '/admin/stats.js';
import * as logs from '/admin/logs.js';
import * as report from '/admin/report.js';
import * as live from '/admin/live.js';

const REFRESH_MS = 3_000;
const TABS = ['show', 'lines', 'crew', 'soundcard', 'streams', 'system'];
/** The tabs of earlier versions, still in bookmarks: where each went. */
const OLD_TABS = { groups: 'lines', positions: 'lines', users: 'crew', stats: 'system', logs: 'system' };
/** The tabs' modules: `init(context)`, `reset()`, and `shown(tab)` for some. */
const MODULES = [show, groups, streams, positions, soundcard, aes67, users, stats, report, logs];

const root = document.documentElement;
const ui = {
  ...elements({
    loginView: 'login-view',
    loginForm: 'login-form',
    token: 'token',
    loginError: 'login-error',
    login: 'login',
    app: 'app',
    logout: 'logout',
    offline: 'offline',
    offlineDetail: 'offline-detail',
    lastRefresh: 'last-refresh',
    live: 'live',
  }),
  tablist: document.querySelector('[role="tablist"]'),
};

/** The groups, for the tabs that only name them (select options): a failure is said elsewhere. */
const groupNames = () => groups.fetchGroups().catch(() => null);

/** What each tab fetches when it is visible. */
const refreshers = {
  show: () => show.refresh(),
  lines: () => Promise.all([groups.refresh(), positions.refresh(), soundcard.refreshAudio()]),
  crew: () => users.refresh(),
  soundcard: () => Promise.all([groupNames().then(() => soundcard.refresh()), aes67.refresh()]),
  streams: () => groupNames().then(() => streams.refresh()),
  system: () => logs.refresh(), // the stats are fetched on every tick anyway
};

let active = 'show';
let loggedIn = false;
let timer = null;
let running = null;
let again = false;
let lastContact = 0;

// ---------------------------------------------------------------------------------------------
// Refresh loop

async function tick() {
  clearTimeout(timer);
  if (!loggedIn) return;
  if (running) {
    again = true;
    return;
  }
  const started = performance.now();
  running = (async () => {
    const tab = active;
    await Promise.allSettled([stats.refresh(), refreshers[tab]()]);
  })();
  await running;
  running = null;
  if (!loggedIn) return;
  if (lastContact) setText(ui.lastRefresh, `Updated ${new Date(lastContact).toLocaleTimeString()}`);
  if (again) {
    again = false;
    tick();
  } else {
    // Every 3 s from start to start: a change on the server shows within 3 s plus one fetch.
    timer = setTimeout(tick, Math.max(0, REFRESH_MS - (performance.now() - started)));
  }
}

/**
 * Events that change nothing the admin UI shows outside the System tab's logs: a log line, and
 * who talks (only the Show tab has talk lights, and it takes them from the event itself:
 * refreshing on each would fetch every page at voice pace).
 */
const QUIET_EVENTS = new Set(['log', 'talking', 'stoppedTalking']);
/** On the Show tab, also what it writes in place from the event (a link's quality, a member's node). */
const QUIET_ON_SHOW = new Set([...QUIET_EVENTS, 'linkChanged', 'sessionMoved']);

/** Live events (`names`: those since the last call, null after a reconnect): fetch again now. */
function onLiveEvents(names) {
  const quiet = active === 'show' ? QUIET_ON_SHOW : QUIET_EVENTS;
  const onlyQuiet = names && [...names].every((name) => quiet.has(name));
  if (!onlyQuiet || (active === 'system' && names.has('log'))) refreshNow();
}

/** Fetch again now (after a change, on a tab switch). */
export function refreshNow() {
  tick();
}

on({
  reachable() {
    lastContact = Date.now();
    if (!ui.offline.hidden) {
      ui.offline.hidden = true;
      root.removeAttribute('data-offline');
    }
  },
  unreachable() {
    if (!loggedIn) return;
    const detail = lastContact
      ? `Retrying every 3 s; last contact at ${new Date(lastContact).toLocaleTimeString()}. What you see may be out of date.`
      : 'Retrying every 3 s.';
    setText(ui.offlineDetail, detail);
    if (ui.offline.hidden) {
      ui.offline.hidden = false;
      root.dataset.offline = '';
    }
  },
  unauthorized() {
    if (!loggedIn) return;
    logout('The server refused the token (it may have changed). Log in again.');
  },
});

// ---------------------------------------------------------------------------------------------
// Tabs (WAI-ARIA tabs: arrow keys move between tabs, the selected one is in the tab order)

function tabButton(name) {
  return $(`tab-${name}`);
}

/** The tab a hash names (`#crew`, or an old name such as `#users`), or null. */
function tabOfHash(hash) {
  const name = hash.replace(/^#/, '');
  if (TABS.includes(name)) return name;
  return OLD_TABS[name] ?? null;
}

/**
 * Shows tab `name`. A tab the admin chose is a new step of the history (`push`), so that Back
 * returns to the previous one; one taken from the address (a deep link, Back) only replaces
 * an old name in it.
 */
function selectTab(name, { focus = false, push = false } = {}) {
  if (!TABS.includes(name)) name = 'show';
  active = name;
  for (const tab of TABS) {
    const selected = tab === name;
    const button = tabButton(tab);
    button.setAttribute('aria-selected', String(selected));
    button.tabIndex = selected ? 0 : -1;
    $(`panel-${tab}`).hidden = !selected;
  }
  root.dataset.tab = name;
  if (focus) tabButton(name).focus();
  if (location.hash !== `#${name}`) {
    if (push) history.pushState(null, '', `#${name}`);
    else history.replaceState(null, '', `#${name}`);
  }
  for (const module of MODULES) module.shown?.(name);
  refreshNow();
}

function initTabs() {
  for (const tab of TABS) tabButton(tab).addEventListener('click', () => selectTab(tab, { push: true }));
  ui.tablist.addEventListener('keydown', (event) => {
    const at = TABS.indexOf(active);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: TABS.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    selectTab(TABS[(to + TABS.length) % TABS.length], { focus: true, push: true });
  });
  // Back and Forward (popstate), and a hash typed or followed (hashchange).
  const follow = () => {
    const name = tabOfHash(location.hash);
    if (!name) return;
    if (name !== active) selectTab(name);
    else if (location.hash !== `#${name}`) history.replaceState(null, '', `#${name}`); // an old name
  };
  window.addEventListener('hashchange', follow);
  window.addEventListener('popstate', follow);
}

// ---------------------------------------------------------------------------------------------
// Login and logout

function showLogin(message) {
  loggedIn = false;
  clearTimeout(timer);
  root.dataset.view = 'login';
  ui.app.hidden = true;
  ui.logout.hidden = true;
  ui.offline.hidden = true;
  root.removeAttribute('data-offline');
  setText(ui.lastRefresh, '');
  ui.loginView.hidden = false;
  showError(ui.loginError, message ?? null);
  ui.token.value = '';
  ui.token.focus();
}

function enterApp() {
  loggedIn = true;
  root.dataset.view = 'app';
  ui.loginView.hidden = true;
  ui.app.hidden = false;
  ui.logout.hidden = false;
  ui.live.hidden = false;
  live.start();
  selectTab(tabOfHash(location.hash) ?? 'show');
}

function logout(message) {
  live.stop();
  ui.live.hidden = true;
  token.clear();
  for (const module of MODULES) module.reset?.();
  lastContact = 0;
  showLogin(message);
}

async function onLogin(event) {
  event.preventDefault();
  const candidate = ui.token.value.trim();
  if (!candidate) {
    showError(ui.loginError, 'Type the admin token.');
    ui.token.focus();
    return;
  }
  showError(ui.loginError, null);
  ui.login.disabled = true;
  try {
    await api('GET', '/stats', undefined, { bearer: candidate });
    token.set(candidate);
    enterApp();
  } catch (error) {
    const message =
      error instanceof ApiError && error.status === 401
        ? 'This token is not valid.'
        : error instanceof Unreachable
          ? 'The server does not answer. Check that partyline-control runs, then try again.'
          : error.message;
    showError(ui.loginError, message);
    ui.token.select();
  } finally {
    ui.login.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------

function init() {
  initTheme($('theme'));
  const context = { refreshNow };
  for (const module of MODULES) module.init(context);
  live.init(ui.live, onLiveEvents, show.onEvent);
  initTabs();
  ui.loginForm.addEventListener('submit', onLogin);
  ui.logout.addEventListener('click', () => logout());
  // Coming back to a hidden tab: fetch at once rather than at the next tick.
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refreshNow();
  });
  if (token.get()) enterApp();
  else showLogin();
}

init();
