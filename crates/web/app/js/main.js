// The shell of the dsh web app: the connection, the session list, the open session, the
// composer with its queue and completions, approvals and questions, the dialogs. Everything the
// agent or a peer supplies reaches the page as text (textContent) or through markdown.js.

import { AcpClient } from './acp.js';
import { SessionView, imageNode } from './session.js';
import { renderMarkdown } from './markdown.js';
import { renderDiff } from './diff.js';
import { api } from './api.js';

const $ = (id) => document.getElementById(id);
const el = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
};

const state = {
  sessions: [],
  tree: new Map(),
  view: null,
  views: new Map(), // sessionId → SessionView this connection has created or loaded
  running: new Map(), // sessionId → true while a turn this page knows of runs
  queues: new Map(), // sessionId → [{id, blocks}]
  interactions: [], // pending agent→client requests {sessionId, kind, params, resolve}
  attachments: [],
  search: '',
  loading: null,
};

const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/acp`;
const acp = new AcpClient(wsUrl);
window.dshApp = { state, acp }; // for the browser tests and the curious

// ---------- small helpers ----------

function toast(text, kind = 'info') {
  const node = $('toast');
  node.textContent = text;
  node.dataset.kind = kind;
  node.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (node.hidden = true), 5000);
}

function relativeTime(iso) {
  if (!iso) return '';
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return '';
  const seconds = Math.max(0, (Date.now() - then) / 1000);
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  if (seconds < 86400 * 7) return `${Math.floor(seconds / 86400)} d ago`;
  return new Date(then).toLocaleDateString();
}

function shortPath(path) {
  const text = String(path || '');
  const parts = text.split('/').filter(Boolean);
  return parts.length > 2 ? `…/${parts.slice(-2).join('/')}` : text;
}

function formatTokens(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return String(n);
}

function recentFolders() {
  try {
    const list = JSON.parse(localStorage.getItem('dsh.recent') || '[]');
    return Array.isArray(list) ? list.filter((p) => typeof p === 'string') : [];
  } catch {
    return [];
  }
}

function rememberFolder(path) {
  const list = [path, ...recentFolders().filter((p) => p !== path)].slice(0, 8);
  try {
    localStorage.setItem('dsh.recent', JSON.stringify(list));
  } catch {}
}

function setTheme(theme) {
  const root = document.documentElement;
  if (theme === 'light' || theme === 'dark') root.dataset.theme = theme;
  else delete root.dataset.theme;
  try {
    if (theme === 'system') localStorage.removeItem('dsh.theme');
    else localStorage.setItem('dsh.theme', theme);
  } catch {}
  $('theme-label').textContent = theme === 'system' ? 'System theme' : theme === 'dark' ? 'Dark' : 'Light';
}

// ---------- connection ----------

acp.addEventListener('state', (event) => {
  const label = { connecting: 'connecting…', connected: 'connected', reconnecting: 'reconnecting…' }[event.detail];
  $('conn-state').textContent = label || event.detail;
  $('conn-state').dataset.state = event.detail;
  updateComposer();
});

acp.addEventListener('ready', async () => {
  await refreshSessions();
  const id = routeSession();
  if (id) await openSession(id);
  else showWelcome();
});

acp.addEventListener('reconnected', async () => {
  // A new connection knows nothing of this page: load the open session again (the replay
  // rebuilds the conversation, so nothing is lost or shown twice).
  state.views.clear();
  // What the old connection was asked or was running died with it; the server asks again.
  state.running.clear();
  for (const item of state.interactions) item.resolve({ outcome: { outcome: 'cancelled' } });
  state.interactions = [];
  renderInteraction();
  await refreshSessions();
  if (state.view) await openSession(state.view.id, { reload: true });
});

acp.addEventListener('notification', (event) => {
  const message = event.detail;
  if (message.method === 'session/update') {
    const { sessionId, update } = message.params || {};
    if (!update) return;
    state.views.get(sessionId)?.apply(update);
    noteActivity(sessionId, update);
  } else if (message.method === '$/cancel_request' || message.method === '$/cancelRequest') {
    const id = message.params?.requestId ?? message.params?.id;
    dropInteraction((item) => item.rpcId === id, { outcome: { outcome: 'cancelled' } });
  } else if (message.method === '_dsh/turn' || message.method === '_dsh/session_status') {
    const { sessionId, running } = message.params || {};
    setRunning(sessionId, Boolean(running));
  } else if (message.method === '_dsh/sessions_changed') {
    refreshSessions();
  }
});

// ACP tells a client when its own prompt ends, not when another viewer's turn does. A turn
// this page did not start is seen through its updates: a running call, or output within the
// last few seconds, means the session is busy (Stop and the queue follow it).
const QUIET_MS = 4000;
const observed = new Map(); // sessionId → {timer, calls: Set of running call ids}

function observe(sessionId, update) {
  const kind = update.sessionUpdate;
  const busy = ['agent_message_chunk', 'agent_thought_chunk', 'tool_call', 'tool_call_update', 'plan'].includes(kind);
  if (!busy || state.loading === sessionId) return;
  const entry = observed.get(sessionId) || { timer: null, calls: new Set() };
  observed.set(sessionId, entry);
  if (kind === 'tool_call' || kind === 'tool_call_update') {
    if (update.status === 'completed' || update.status === 'failed') entry.calls.delete(update.toolCallId);
    else if (update.status) entry.calls.add(update.toolCallId);
  }
  const wasBusy = state.running.has(sessionId) || observed.get(sessionId).busy;
  entry.busy = true;
  clearTimeout(entry.timer);
  const settle = () => {
    if (entry.calls.size) {
      entry.timer = setTimeout(settle, QUIET_MS);
      return;
    }
    entry.busy = false;
    observed.delete(sessionId);
    sessionBusyChanged(sessionId);
  };
  entry.timer = setTimeout(settle, QUIET_MS);
  if (!wasBusy) sessionBusyChanged(sessionId);
}

function busy(sessionId) {
  return state.running.has(sessionId) || Boolean(observed.get(sessionId)?.busy);
}

function sessionBusyChanged(sessionId) {
  renderSessions();
  if (state.view?.id === sessionId) updateComposer();
  if (!busy(sessionId)) drainQueue(sessionId);
}

function noteActivity(sessionId, update) {
  const kind = update.sessionUpdate;
  observe(sessionId, update);
  if (kind === 'session_info_update') {
    const row = state.sessions.find((s) => s.sessionId === sessionId);
    if (row && typeof update.title === 'string') {
      row.title = update.title;
      row.updatedAt = update.updatedAt || row.updatedAt;
      renderSessions();
    }
  }
  // A call that starts running or ends was answered: its pending approval (asked of this page
  // too) is settled elsewhere.
  if (kind === 'tool_call_update' && update.status && update.status !== 'pending') {
    dropInteraction(
      (item) => item.kind === 'permission' && item.params.toolCall?.toolCallId === update.toolCallId && item.sessionId === sessionId,
      { outcome: { outcome: 'cancelled' } },
    );
  }
}

function setRunning(sessionId, running) {
  if (!sessionId) return;
  if (running) state.running.set(sessionId, true);
  else {
    state.running.delete(sessionId);
    // This page's own prompt ended: its updates are not another viewer's turn.
    const entry = observed.get(sessionId);
    if (entry) {
      clearTimeout(entry.timer);
      observed.delete(sessionId);
    }
  }
  sessionBusyChanged(sessionId);
}

// ---------- routing ----------

function routeSession() {
  const match = location.hash.match(/^#\/s\/([^/?#]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

window.addEventListener('hashchange', () => {
  const id = routeSession();
  if (id && id !== state.view?.id) openSession(id);
  if (!id && state.view) showWelcome();
});

// ---------- sessions ----------

async function refreshSessions() {
  try {
    const result = await acp.request('session/list', {});
    state.sessions = result.sessions || [];
  } catch (error) {
    toast(`Could not list sessions: ${error.message}`, 'error');
  }
  try {
    const listed = await api.sessions();
    state.tree = new Map();
    for (const node of listed?.sessions || []) {
      if (node.parentSessionId) {
        const list = state.tree.get(node.parentSessionId) || [];
        list.push(node);
        state.tree.set(node.parentSessionId, list);
      }
    }
  } catch {
    state.tree = new Map();
  }
  renderSessions();
}

function renderSessions() {
  const nav = $('session-list');
  const query = state.search.trim().toLowerCase();
  const childIds = new Set([...state.tree.values()].flat().map((c) => c.sessionId));
  const rows = state.sessions.filter((s) => !childIds.has(s.sessionId));
  const matches = (s) =>
    !query ||
    String(s.title || '').toLowerCase().includes(query) ||
    String(s.cwd || '').toLowerCase().includes(query) ||
    s.sessionId.toLowerCase().includes(query);
  const list = el('ul', 'sessions');
  let shown = 0;
  for (const session of rows) {
    const children = state.tree.get(session.sessionId) || [];
    if (!matches(session) && !children.some(matches)) continue;
    list.append(sessionRow(session, children));
    shown++;
  }
  if (!shown) {
    list.append(el('li', 'empty', query ? 'No session matches.' : 'No sessions yet.'));
  }
  nav.replaceChildren(list);
}

function sessionRow(session, children) {
  const item = el('li');
  const link = el('a', 'session-row');
  link.href = `#/s/${encodeURIComponent(session.sessionId)}`;
  link.dataset.sessionId = session.sessionId;
  if (state.view?.id === session.sessionId) link.setAttribute('aria-current', 'page');
  const title = el('span', 'row-title', session.title || 'Untitled session');
  const meta = el('span', 'row-meta');
  meta.append(el('span', 'row-cwd', shortPath(session.cwd)), el('span', 'row-time', relativeTime(session.updatedAt)));
  const status = el('span', 'row-status');
  const waiting = state.interactions.some((i) => i.sessionId === session.sessionId);
  if (waiting) {
    status.classList.add('waiting');
    status.title = 'Waiting for your answer';
  } else if (busy(session.sessionId)) {
    status.classList.add('running');
    status.title = 'Running';
  }
  link.append(status, title, meta);
  link.setAttribute('aria-label', `${session.title || 'Untitled session'}, in ${session.cwd}${waiting ? ', waiting for your answer' : ''}`);
  link.addEventListener('click', () => closeDrawer());
  item.append(link);
  if (children.length) {
    const nested = el('ul', 'children');
    nested.setAttribute('aria-label', 'Delegated sessions');
    for (const child of children) {
      const row = el('li');
      const a = el('a', 'session-row child');
      a.href = `#/s/${encodeURIComponent(child.sessionId)}`;
      a.append(el('span', `row-status ${child.running || child.live ? 'running' : ''}`), el('span', 'row-title', child.title || child.label || child.sessionId));
      row.append(a);
      nested.append(row);
    }
    item.append(nested);
  }
  return item;
}

function show(view) {
  state.view = view;
  $('messages').replaceChildren(view.container);
  $('welcome').hidden = true;
}

function showWelcome() {
  state.view = null;
  $('messages').replaceChildren();
  $('welcome').hidden = false;
  $('session-title').textContent = 'dsh';
  $('session-cwd').textContent = '';
  document.title = 'dsh';
  $('mode-chip').hidden = true;
  $('model-chip').hidden = true;
  $('context-meter').hidden = true;
  $('plan').hidden = true;
  const recent = $('welcome-recent');
  recent.replaceChildren();
  const folders = recentFolders();
  if (folders.length) {
    recent.append(el('h3', null, 'Recent folders'));
    for (const folder of folders.slice(0, 5)) {
      const button = el('button', 'folder-chip', folder);
      button.type = 'button';
      button.addEventListener('click', () => startSession(folder));
      recent.append(button);
    }
  }
  renderSessions();
  updateComposer();
  renderInteraction();
}

function bindView(view) {
  view.addEventListener('info', () => renderHeader());
  view.addEventListener('modes', () => renderModes());
  view.addEventListener('usage', () => renderUsage());
  view.addEventListener('plan', () => renderPlan());
}

async function startSession(cwd) {
  try {
    const result = await acp.request('session/new', { cwd, mcpServers: [] });
    rememberFolder(cwd);
    const view = new SessionView(result.sessionId, cwd, $('transcript'));
    state.views.set(view.id, view);
    show(view);
    adoptSession(view, result);
    state.sessions.unshift({ sessionId: result.sessionId, cwd, title: null, updatedAt: new Date().toISOString() });
    history.replaceState(null, '', `#/s/${encodeURIComponent(result.sessionId)}`);
    renderSessions();
    $('composer-input').focus();
  } catch (error) {
    toast(`Could not start a session in ${cwd}: ${error.message}`, 'error');
  }
}

function adoptSession(view, result) {
  view.modes = result?.modes || null;
  view.configOptions = result?.configOptions || null;
  bindView(view);
  renderView();
}

function renderView() {
  renderHeader();
  renderModes();
  renderUsage();
  renderPlan();
  renderQueue();
  renderInteraction();
  updateComposer();
}

async function openSession(id, { reload = false } = {}) {
  const known =
    state.sessions.find((s) => s.sessionId === id) ||
    [...state.tree.values()].flat().find((s) => s.sessionId === id);
  const cwd = known?.cwd;
  if (!cwd) {
    toast('That session is not in the list of stored sessions.', 'error');
    showWelcome();
    return;
  }
  const scroller = $('transcript');
  const cached = state.views.get(id);
  if (cached) {
    show(cached);
    renderView();
    cached.scrollToEnd();
    renderSessions();
    return;
  }
  const keepScroll = reload ? scroller.scrollTop : null;
  const view = new SessionView(id, cwd, scroller);
  view.title = known?.title || null;
  state.views.set(id, view);
  show(view);
  state.loading = id;
  renderHeader();
  try {
    const result = await acp.request('session/load', { sessionId: id, cwd, mcpServers: [] });
    adoptSession(view, result);
    if (state.view !== view) return;
    const running = result?._meta?.dsh?.running ?? result?._meta?.running;
    if (running !== undefined) setRunning(id, Boolean(running));
    if (keepScroll !== null) scroller.scrollTop = keepScroll;
    else view.scrollToEnd();
  } catch (error) {
    state.views.delete(id);
    view.notice(`Could not open this session: ${error.message}`, 'error');
  } finally {
    if (state.loading === id) state.loading = null;
  }
  renderSessions();
}

// ---------- header, modes, usage, plan ----------

function renderHeader() {
  const view = state.view;
  if (!view) return;
  const title = view.title || state.sessions.find((s) => s.sessionId === view.id)?.title || 'New session';
  $('session-title').textContent = title;
  $('session-cwd').textContent = view.cwd;
  $('session-cwd').title = view.cwd;
  document.title = `${title} · dsh`;
}

function renderModes() {
  const view = state.view;
  const modeSelect = $('mode-select');
  if (view?.modes?.availableModes?.length) {
    modeSelect.replaceChildren(
      ...view.modes.availableModes.map((mode) => {
        const option = el('option', null, mode.name || mode.id);
        option.value = mode.id;
        if (mode.description) option.title = mode.description;
        return option;
      }),
    );
    modeSelect.value = view.modes.currentModeId;
    $('mode-chip').hidden = false;
  } else $('mode-chip').hidden = true;
  const model = (view?.configOptions || []).find((o) => o.category === 'model' || o.id === 'model');
  const modelSelect = $('model-select');
  if (model && Array.isArray(model.options)) {
    const flat = model.options.flatMap((o) => (o.options ? o.options : [o]));
    modelSelect.replaceChildren(
      ...flat.map((o) => {
        const option = el('option', null, o.name || o.value);
        option.value = o.value;
        return option;
      }),
    );
    modelSelect.value = model.currentValue;
    modelSelect.dataset.configId = model.id;
    $('model-chip').hidden = false;
  } else $('model-chip').hidden = true;
}

$('mode-select').addEventListener('change', async (event) => {
  const view = state.view;
  if (!view) return;
  const modeId = event.target.value;
  try {
    await acp.request('session/set_mode', { sessionId: view.id, modeId });
    if (view.modes) view.modes.currentModeId = modeId;
  } catch (error) {
    toast(`Could not switch the mode: ${error.message}`, 'error');
    renderModes();
  }
});

$('model-select').addEventListener('change', async (event) => {
  const view = state.view;
  if (!view) return;
  try {
    const result = await acp.request('session/set_config_option', {
      sessionId: view.id,
      configId: event.target.dataset.configId || 'model',
      value: event.target.value,
    });
    if (result?.configOptions) view.configOptions = result.configOptions;
    toast(`Model: ${event.target.value} from the next request on`);
  } catch (error) {
    toast(`Could not switch the model: ${error.message}`, 'error');
  }
  renderModes();
});

function renderUsage() {
  const usage = state.view?.usage;
  const meter = $('context-meter');
  if (!usage || !usage.size) {
    meter.hidden = true;
    $('usage').textContent = '';
    return;
  }
  const percent = Math.min(100, Math.round((usage.used / usage.size) * 100));
  meter.hidden = false;
  meter.setAttribute('aria-valuenow', String(percent));
  meter.title = `${formatTokens(usage.used)} of ${formatTokens(usage.size)} tokens in context`;
  meter.dataset.level = percent >= 85 ? 'high' : percent >= 60 ? 'mid' : 'low';
  $('meter-fill').style.strokeDasharray = `${(percent / 100) * 94.25} 94.25`;
  $('meter-text').textContent = percent === 0 && usage.used > 0 ? '<1%' : `${percent}%`;
  let text = `${formatTokens(usage.used)} / ${formatTokens(usage.size)} tokens`;
  if (usage.cost && typeof usage.cost.amount === 'number') text += ` · ${usage.cost.amount.toFixed(4)} ${usage.cost.currency || ''}`;
  $('usage').textContent = text;
}

function renderPlan() {
  const plan = $('plan');
  const entries = state.view?.plan || [];
  if (!entries.length) {
    plan.hidden = true;
    return;
  }
  const done = entries.filter((e) => e.status === 'completed').length;
  const details = el('details');
  details.open = plan.dataset.open !== 'false';
  details.addEventListener('toggle', () => (plan.dataset.open = String(details.open)));
  const summary = el('summary', null);
  summary.append(el('span', 'plan-label', 'Plan'), el('span', 'plan-count', `${done}/${entries.length}`));
  const list = el('ol', 'plan-list');
  for (const entry of entries) {
    const item = el('li', `plan-entry ${entry.status}`);
    const mark = el('span', 'plan-mark', entry.status === 'completed' ? '✓' : entry.status === 'in_progress' ? '◐' : '○');
    mark.setAttribute('aria-label', entry.status.replace('_', ' '));
    item.append(mark, el('span', null, entry.content));
    list.append(item);
  }
  details.append(summary, list);
  plan.replaceChildren(details);
  plan.hidden = false;
}

// ---------- composer, queue, prompts ----------

function updateComposer() {
  const view = state.view;
  const input = $('composer-input');
  const connected = acp.state === 'connected';
  const asking = view && state.interactions.some((i) => i.sessionId === view.id);
  input.disabled = !view || !connected;
  $('composer').hidden = Boolean(asking);
  input.placeholder = !view
    ? 'Choose a folder to start a session'
    : busy(view.id)
      ? 'Queue a follow-up… (sent when this turn ends)'
      : 'Ask dsh…  (/ for commands)';
  $('send').disabled = input.disabled;
  $('send').textContent = view && busy(view.id) ? 'Queue' : 'Send';
  $('stop').hidden = !(view && busy(view.id));
  const images = acp.agent?.agentCapabilities?.promptCapabilities?.image;
  document.querySelector('.attach').hidden = !images;
}

function promptBlocks(text) {
  const blocks = [];
  if (text) blocks.push({ type: 'text', text });
  for (const image of state.attachments) blocks.push({ type: 'image', mimeType: image.mimeType, data: image.data });
  return blocks;
}

async function submitPrompt() {
  const view = state.view;
  const input = $('composer-input');
  const text = input.value.trim();
  if (!view || (!text && !state.attachments.length)) return;
  const blocks = promptBlocks(text);
  input.value = '';
  autosize();
  state.attachments = [];
  renderAttachments();
  closeCompletion();
  if (busy(view.id)) {
    const queue = state.queues.get(view.id) || [];
    queue.push({ id: crypto.randomUUID ? crypto.randomUUID() : String(Math.random()), blocks });
    state.queues.set(view.id, queue);
    renderQueue();
    return;
  }
  await sendPrompt(view.id, blocks);
}

async function sendPrompt(sessionId, blocks) {
  if (state.view?.id === sessionId) state.view.localUser(blocks);
  setRunning(sessionId, true);
  try {
    const result = await acp.request('session/prompt', { sessionId, prompt: blocks });
    const view = state.view?.id === sessionId ? state.view : null;
    if (view) {
      view.endBlock();
      if (result?.stopReason === 'cancelled') view.notice('Stopped.', 'muted');
      else if (result?.stopReason === 'max_tokens') view.notice('The answer hit the output limit.', 'warn');
      else if (result?.stopReason === 'refusal') view.notice('The model refused.', 'warn');
      else if (result?.stopReason === 'max_turn_requests') view.notice('The turn hit its step limit.', 'warn');
    }
  } catch (error) {
    if (state.view?.id === sessionId && error.message !== 'connection lost') {
      state.view.notice(error.message, 'error');
    }
    if (error.message === 'connection lost') return; // the reconnect reloads the session
  }
  setRunning(sessionId, false);
  refreshSessions();
}

function drainQueue(sessionId) {
  const queue = state.queues.get(sessionId);
  if (!queue?.length || busy(sessionId)) return;
  const next = queue.shift();
  renderQueue();
  sendPrompt(sessionId, next.blocks);
}

function renderQueue() {
  const node = $('queue');
  const queue = (state.view && state.queues.get(state.view.id)) || [];
  if (!queue.length) {
    node.hidden = true;
    node.replaceChildren();
    return;
  }
  const list = el('ul');
  for (const item of queue) {
    const row = el('li', 'queued');
    const text = item.blocks.filter((b) => b.type === 'text').map((b) => b.text).join(' ');
    row.append(el('span', 'queued-label', 'Queued'), el('span', 'queued-text', text || '(image)'));
    const edit = el('button', 'ghost small', 'Edit');
    edit.type = 'button';
    edit.setAttribute('aria-label', `Edit queued prompt: ${text}`);
    edit.addEventListener('click', () => {
      removeQueued(item.id);
      $('composer-input').value = text;
      autosize();
      $('composer-input').focus();
    });
    const remove = el('button', 'ghost small', 'Remove');
    remove.type = 'button';
    remove.setAttribute('aria-label', `Remove queued prompt: ${text}`);
    remove.addEventListener('click', () => removeQueued(item.id));
    row.append(edit, remove);
    list.append(row);
  }
  node.replaceChildren(list);
  node.hidden = false;
}

function removeQueued(id) {
  const queue = state.queues.get(state.view?.id) || [];
  const index = queue.findIndex((q) => q.id === id);
  if (index >= 0) queue.splice(index, 1);
  renderQueue();
}

function stopTurn() {
  const view = state.view;
  if (!view || !busy(view.id)) return;
  try {
    acp.notify('session/cancel', { sessionId: view.id });
  } catch (error) {
    toast(`Could not stop: ${error.message}`, 'error');
  }
}

function autosize() {
  const input = $('composer-input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, window.innerHeight * 0.4)}px`;
}

$('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  submitPrompt();
});
$('stop').addEventListener('click', stopTurn);

// ---------- completion: /commands and @files ----------

const completion = { items: [], index: 0, kind: null, start: 0 };

function closeCompletion() {
  completion.items = [];
  $('completion').hidden = true;
  $('composer-input').setAttribute('aria-expanded', 'false');
  $('composer-input').removeAttribute('aria-activedescendant');
}

function showCompletion(items, kind, start) {
  completion.items = items;
  completion.kind = kind;
  completion.start = start;
  completion.index = 0;
  const box = $('completion');
  if (!items.length) {
    closeCompletion();
    return;
  }
  box.replaceChildren(
    ...items.map((item, i) => {
      const option = el('div', 'option');
      option.id = `completion-${i}`;
      option.setAttribute('role', 'option');
      option.append(el('span', 'option-name', item.label));
      if (item.detail) option.append(el('span', 'option-detail', item.detail));
      option.addEventListener('mousedown', (event) => {
        event.preventDefault();
        completion.index = i;
        acceptCompletion();
      });
      return option;
    }),
  );
  box.hidden = false;
  $('composer-input').setAttribute('aria-expanded', 'true');
  highlightCompletion();
}

function highlightCompletion() {
  [...$('completion').children].forEach((node, i) => node.setAttribute('aria-selected', String(i === completion.index)));
  $('composer-input').setAttribute('aria-activedescendant', `completion-${completion.index}`);
  $('completion').children[completion.index]?.scrollIntoView({ block: 'nearest' });
}

function acceptCompletion() {
  const item = completion.items[completion.index];
  if (!item) return;
  const input = $('composer-input');
  const before = input.value.slice(0, completion.start);
  const after = input.value.slice(input.selectionStart);
  input.value = `${before}${item.insert}${after}`;
  const caret = before.length + item.insert.length;
  input.setSelectionRange(caret, caret);
  closeCompletion();
  if (item.again) updateCompletion();
  input.focus();
}

let fileLookup = 0;
async function updateCompletion() {
  const input = $('composer-input');
  const view = state.view;
  if (!view) return closeCompletion();
  const upto = input.value.slice(0, input.selectionStart);
  const slash = upto.match(/^\/([\w:-]*)$/);
  if (slash) {
    const word = slash[1].toLowerCase();
    const items = view.commands
      .filter((c) => c.name.toLowerCase().startsWith(word))
      .slice(0, 12)
      .map((c) => ({ label: `/${c.name}`, detail: c.description || c.input?.hint || '', insert: `/${c.name} ` }));
    return showCompletion(items, 'command', 0);
  }
  const at = upto.match(/(^|\s)@([^\s@]*)$/);
  if (at) {
    const prefix = at[2];
    const start = upto.length - prefix.length - 1;
    const ticket = ++fileLookup;
    try {
      if (!api.files) return closeCompletion();
      const result = await api.files(view.cwd, prefix);
      if (ticket !== fileLookup) return;
      const items = (result?.entries || []).slice(0, 20).map((entry) => {
        const dir = entry.kind === 'dir' || entry.dir;
        const path = entry.path || entry.name;
        return { label: `@${path}${dir ? '/' : ''}`, detail: dir ? 'folder' : 'file', insert: `@${path}${dir ? '/' : ' '}`, again: dir };
      });
      return showCompletion(items, 'file', start);
    } catch {
      return closeCompletion();
    }
  }
  closeCompletion();
}

$('composer-input').addEventListener('input', () => {
  autosize();
  updateCompletion();
});

$('composer-input').addEventListener('keydown', (event) => {
  if (completion.items.length && !$('completion').hidden) {
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      const n = completion.items.length;
      completion.index = (completion.index + (event.key === 'ArrowDown' ? 1 : n - 1)) % n;
      highlightCompletion();
      return;
    }
    if (event.key === 'Tab' || (event.key === 'Enter' && !event.shiftKey)) {
      event.preventDefault();
      acceptCompletion();
      return;
    }
    if (event.key === 'Escape') {
      event.preventDefault();
      closeCompletion();
      return;
    }
  }
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submitPrompt();
  } else if (event.key === 'Escape' && state.view && busy(state.view.id)) {
    event.preventDefault();
    stopTurn();
  }
});

// ---------- attachments ----------

$('attach-input').addEventListener('change', async (event) => {
  for (const file of event.target.files || []) await addAttachment(file);
  event.target.value = '';
});

$('composer-input').addEventListener('paste', async (event) => {
  const files = [...(event.clipboardData?.files || [])].filter((f) => f.type.startsWith('image/'));
  if (!files.length) return;
  event.preventDefault();
  for (const file of files) await addAttachment(file);
});

async function addAttachment(file) {
  if (!/^image\/(png|jpeg|gif|webp)$/.test(file.type)) {
    toast(`${file.name}: only PNG, JPEG, GIF and WebP images can be attached`, 'error');
    return;
  }
  if (file.size > 10 * 1024 * 1024) {
    toast(`${file.name} is larger than 10 MB`, 'error');
    return;
  }
  const data = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
  state.attachments.push({ name: file.name, mimeType: file.type, data });
  renderAttachments();
}

function renderAttachments() {
  const node = $('attachments');
  node.hidden = !state.attachments.length;
  node.replaceChildren(
    ...state.attachments.map((image, i) => {
      const chip = el('div', 'attachment');
      chip.append(imageNode(image, image.name));
      const remove = el('button', 'icon-button', '✕');
      remove.type = 'button';
      remove.setAttribute('aria-label', `Remove ${image.name}`);
      remove.addEventListener('click', () => {
        state.attachments.splice(i, 1);
        renderAttachments();
      });
      chip.append(remove);
      return chip;
    }),
  );
}

// ---------- approvals and questions ----------

acp.handle('session/request_permission', (params, message) =>
  new Promise((resolve) => {
    state.interactions.push({ kind: 'permission', sessionId: params.sessionId, params, resolve, rpcId: message.id });
    interactionsChanged();
  }),
);

acp.handle('elicitation/create', (params, message) =>
  new Promise((resolve) => {
    state.interactions.push({ kind: 'question', sessionId: params.sessionId, params, resolve, rpcId: message.id });
    interactionsChanged();
  }),
);

function dropInteraction(predicate, answer) {
  const before = state.interactions.length;
  state.interactions = state.interactions.filter((item) => {
    if (!predicate(item)) return true;
    item.resolve(answer);
    return false;
  });
  if (state.interactions.length !== before) interactionsChanged();
}

function interactionsChanged() {
  renderInteraction();
  renderSessions();
  updateComposer();
}

function answer(item, result) {
  state.interactions = state.interactions.filter((i) => i !== item);
  item.resolve(result);
  interactionsChanged();
  if (!state.interactions.some((i) => i.sessionId === state.view?.id)) $('composer-input').focus();
}

function renderInteraction() {
  const node = $('interaction');
  const item = state.view && state.interactions.find((i) => i.sessionId === state.view.id);
  if (!item) {
    node.hidden = true;
    node.replaceChildren();
    return;
  }
  node.hidden = false;
  node.replaceChildren(item.kind === 'permission' ? permissionPanel(item) : questionPanel(item));
  node.querySelector('[data-autofocus]')?.focus();
}

const OPTION_LABELS = {
  allow_once: 'Allow once',
  allow_always: 'Allow for this session',
  reject_once: 'Reject',
  reject_always: 'Always reject',
};

function permissionPanel(item) {
  const { toolCall = {}, options = [] } = item.params;
  const raw = toolCall.rawInput && typeof toolCall.rawInput === 'object' ? toolCall.rawInput : {};
  const panel = el('section', 'approval');
  panel.setAttribute('role', 'alertdialog');
  panel.setAttribute('aria-labelledby', 'approval-title');
  panel.setAttribute('aria-describedby', 'approval-body');
  const head = el('div', 'approval-head');
  const heading = el('h2', null, 'Approval needed');
  heading.id = 'approval-title';
  head.append(el('span', 'approval-icon', '!'), heading);
  const body = el('div', 'approval-body');
  body.id = 'approval-body';
  if (toolCall.title && toolCall.title !== raw.command) body.append(el('p', 'approval-title-text', toolCall.title));
  if (typeof raw.command === 'string') {
    const pre = el('pre', 'command');
    pre.append(el('code', null, raw.command));
    pre.setAttribute('aria-label', 'Command');
    body.append(pre);
  }
  const facts = el('dl', 'approval-facts');
  const fact = (name, value) => {
    if (value === undefined || value === null || value === '') return;
    facts.append(el('dt', null, name), el('dd', null, String(value)));
  };
  fact('Mode', raw.sandbox_permissions);
  fact('Justification', raw.justification);
  fact('Description', raw.description);
  fact('Folder', raw.workdir || raw.cwd);
  if (typeof raw.path === 'string') fact('Path', raw.path);
  if (facts.childNodes.length) body.append(facts);
  const texts = (toolCall.content || []).filter((c) => c.type === 'content' && c.content?.type === 'text');
  const diffs = (toolCall.content || []).filter((c) => c.type === 'diff');
  for (const diff of diffs) body.append(renderDiff(state.view?.relative(diff.path) || diff.path, diff.oldText, diff.newText));
  if (texts.length) {
    // The agent's own account of the request; the facts above already say the essentials.
    const more = el('details', 'approval-more');
    more.append(el('summary', null, 'Why this is asked'));
    for (const content of texts) {
      const md = el('div', 'md');
      md.append(renderMarkdown(content.content.text));
      more.append(md);
    }
    if (facts.childNodes.length || typeof raw.command === 'string') body.append(more);
    else {
      more.open = true;
      body.append(more);
    }
  }
  const actions = el('div', 'approval-actions');
  const ordered = [...options].sort((a, b) => rank(a.kind) - rank(b.kind));
  ordered.forEach((option, i) => {
    const button = el('button', option.kind?.startsWith('allow') ? (i === 0 ? 'primary' : 'secondary') : 'danger-outline', OPTION_LABELS[option.kind] || option.name);
    button.type = 'button';
    button.dataset.optionId = option.optionId;
    if (i === 0) button.dataset.autofocus = 'true';
    button.addEventListener('click', () => answer(item, { outcome: { outcome: 'selected', optionId: option.optionId } }));
    actions.append(button);
  });
  panel.append(head, body, actions);
  return panel;
}

function rank(kind) {
  return { allow_once: 0, allow_always: 1, reject_once: 2, reject_always: 3 }[kind] ?? 4;
}

function questionPanel(item) {
  const { requestedSchema = {}, message: prompt = '' } = item.params;
  const properties = requestedSchema.properties || {};
  const panel = el('form', 'question');
  panel.setAttribute('aria-labelledby', 'question-title');
  const ids = Object.keys(properties);
  const labels = ids.flatMap((id) => (properties[id].oneOf || []).map((o) => o.const || o.title));
  const review = labels.some((l) => /^approve/i.test(l)) && /plan/i.test(`${prompt} ${JSON.stringify(properties)}`);
  const heading = el('h2', null, review ? 'Plan review' : ids.length > 1 ? 'Questions' : 'Question');
  heading.id = 'question-title';
  panel.append(heading);
  if (ids.length > 1 && prompt) panel.append(el('p', 'question-prompt', prompt));
  ids.forEach((id, n) => {
    const spec = properties[id];
    const group = el('fieldset', 'question-item');
    const legend = el('legend', null, spec.title || id);
    group.append(legend);
    if (spec.description) {
      const md = el('div', 'md question-detail');
      md.append(renderMarkdown(spec.description));
      group.append(md);
    }
    const name = `q-${n}`;
    if (Array.isArray(spec.oneOf) || Array.isArray(spec.enum)) {
      const choices = spec.oneOf || spec.enum.map((v) => ({ const: v, title: v }));
      for (const choice of choices) {
        const label = el('label', 'choice');
        const radio = el('input');
        radio.type = 'radio';
        radio.name = name;
        radio.value = choice.const;
        radio.required = true;
        label.append(radio, el('span', 'choice-title', choice.title || choice.const));
        if (choice.description) label.append(el('span', 'choice-detail', choice.description));
        group.append(label);
      }
    } else if (spec.type === 'array' && spec.items?.enum) {
      for (const value of spec.items.enum) {
        const label = el('label', 'choice');
        const box = el('input');
        box.type = 'checkbox';
        box.name = name;
        box.value = value;
        label.append(box, el('span', 'choice-title', value));
        group.append(label);
      }
    } else {
      const area = el('textarea');
      area.name = name;
      area.rows = 2;
      area.required = true;
      area.setAttribute('aria-label', spec.title || id);
      group.append(area);
    }
    panel.append(group);
  });
  const actions = el('div', 'approval-actions');
  const submit = el('button', 'primary', 'Answer');
  submit.type = 'submit';
  const cancel = el('button', 'ghost', review ? 'Keep chatting' : 'Skip');
  cancel.type = 'button';
  cancel.addEventListener('click', () => answer(item, { action: 'cancel' }));
  actions.append(cancel, submit);
  panel.append(actions);
  panel.addEventListener('submit', (event) => {
    event.preventDefault();
    const content = {};
    ids.forEach((id, n) => {
      const spec = properties[id];
      const fields = [...panel.elements].filter((f) => f.name === `q-${n}`);
      if (spec.type === 'array') content[id] = fields.filter((f) => f.checked).map((f) => f.value);
      else if (fields[0]?.type === 'radio') content[id] = fields.find((f) => f.checked)?.value;
      else content[id] = fields[0]?.value ?? '';
    });
    answer(item, { action: 'accept', content });
  });
  const first = panel.querySelector('input, textarea');
  if (first) first.dataset.autofocus = 'true';
  return panel;
}

// ---------- new session dialog (workspace picker) ----------

const picker = { path: null, entries: [] };

async function openNewDialog() {
  const dialog = $('new-dialog');
  const recent = $('recent-folders');
  recent.replaceChildren();
  const served = await api.recent().then((r) => r?.folders || [], () => []);
  const folders = [...new Set([...recentFolders(), ...served, ...state.sessions.map((s) => s.cwd).filter(Boolean)])].slice(0, 6);
  if (folders.length) {
    recent.append(el('h3', null, 'Recent'));
    for (const folder of folders) {
      const button = el('button', 'folder-chip', folder);
      button.type = 'button';
      button.addEventListener('click', () => {
        dialog.close();
        startSession(folder);
      });
      recent.append(button);
    }
  }
  dialog.showModal();
  await browse(picker.path || state.view?.cwd || null);
  $('path-input').focus();
}

async function browse(path) {
  const error = $('dir-error');
  error.hidden = true;
  try {
    const result = await api.folders(path);
    // What the person typed meanwhile wins over the listing that arrives late.
    const input = $('path-input');
    if (input.value === '' || input.value === picker.shown || input.value === path) input.value = result.path;
    picker.path = result.path;
    picker.shown = result.path;
    picker.entries = (result.entries || []).filter((e) => e.kind === undefined || e.kind === 'dir' || e.dir !== false);
    renderCrumbs(result);
    renderDirs();
  } catch (e) {
    error.textContent = `Cannot list ${path || 'the home folder'}: ${e.message}`;
    error.hidden = false;
    if (path) $('path-input').value = path;
    picker.path = path;
  }
}

function crumbsOf(path) {
  const names = String(path || '').split('/').filter(Boolean);
  return [{ name: '/', path: '/' }, ...names.map((name, i) => ({ name, path: `/${names.slice(0, i + 1).join('/')}` }))];
}

function renderCrumbs(result) {
  const crumbs = $('crumbs');
  const parts = result.crumbs || crumbsOf(result.path);
  crumbs.replaceChildren(
    ...parts.map((crumb, i) => {
      const button = el('button', crumb.path === '/' ? 'crumb root' : 'crumb', crumb.name || crumb.path);
      button.type = 'button';
      if (i === parts.length - 1) button.setAttribute('aria-current', 'location');
      button.addEventListener('click', () => browse(crumb.path));
      return button;
    }),
  );
}

function renderDirs() {
  const showHidden = $('show-hidden').checked;
  const list = $('dir-list');
  const entries = picker.entries.filter((e) => showHidden || !e.hidden);
  if (!entries.length) {
    list.replaceChildren(el('li', 'empty', 'No folders here.'));
    return;
  }
  list.replaceChildren(
    ...entries.map((entry) => {
      const item = el('li');
      const button = el('button', 'dir', `📁 ${entry.name}`);
      button.type = 'button';
      button.setAttribute('role', 'option');
      button.addEventListener('click', () => browse(entry.path));
      item.append(button);
      return item;
    }),
  );
}

$('show-hidden').addEventListener('change', renderDirs);
$('path-input').addEventListener('keydown', (event) => {
  if (event.key === 'Enter') {
    event.preventDefault();
    browse($('path-input').value.trim());
  }
});
$('new-cancel').addEventListener('click', () => $('new-dialog').close());
$('new-start').addEventListener('click', () => {
  const path = $('path-input').value.trim() || picker.path;
  if (!path) return;
  $('new-dialog').close();
  startSession(path);
});
$('new-session').addEventListener('click', openNewDialog);
$('welcome-new').addEventListener('click', openNewDialog);

// ---------- settings ----------

async function openSettings() {
  const dialog = $('settings-dialog');
  $('settings-error').hidden = true;
  $('set-key').value = '';
  dialog.showModal();
  try {
    const settings = await api.settings();
    $('set-provider').value = settings.provider || '';
    $('set-model').value = settings.model || '';
    $('set-base-url').value = settings.base_url || settings.baseUrl || '';
    $('set-sandbox').value = settings.sandbox || 'workspace-write';
    $('set-approval').value = settings.approval || 'ask';
    const keySet = settings.keySet ?? settings.api_key_set;
    $('key-state').textContent = `${keySet ? 'A key is set. It is never shown again; type a new one to replace it.' : 'No key is set yet.'}${
      settings.apiKeyEnv ? ` (read from ${settings.apiKeyEnv})` : ''}`;
    const status = await api.status().catch(() => null);
    const writable = settings.writable !== false && status?.local !== false;
    $('settings-note').textContent = writable
      ? ''
      : status?.local === false
        ? 'Settings can be changed only from the machine dsh runs on.'
        : 'This server does not change settings yet: edit $DSH_HOME/config.toml and the environment.';
    for (const field of $('settings-form').querySelectorAll('input, select')) field.disabled = !writable;
    $('settings-save').hidden = !writable;
  } catch (error) {
    $('settings-error').textContent = `Cannot read the settings: ${error.message}`;
    $('settings-error').hidden = false;
  }
}

$('settings-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const changes = {
    provider: $('set-provider').value.trim(),
    model: $('set-model').value.trim(),
    base_url: $('set-base-url').value.trim(),
    sandbox: $('set-sandbox').value,
    approval: $('set-approval').value,
  };
  const key = $('set-key').value;
  if (key) changes.api_key = key;
  try {
    await api.saveSettings(changes);
    $('set-key').value = '';
    $('settings-dialog').close();
    toast('Settings saved. New sessions use them.');
  } catch (error) {
    $('settings-error').textContent = `Not saved: ${error.message}`;
    $('settings-error').hidden = false;
  }
});
$('settings-cancel').addEventListener('click', () => $('settings-dialog').close());
$('open-settings').addEventListener('click', openSettings);

// ---------- layout, theme, keys ----------

function openDrawer() {
  document.body.classList.add('drawer-open');
  $('scrim').hidden = false;
  $('session-search').focus();
}
function closeDrawer() {
  document.body.classList.remove('drawer-open');
  $('scrim').hidden = true;
}
$('open-drawer').addEventListener('click', openDrawer);
$('close-drawer').addEventListener('click', closeDrawer);
$('scrim').addEventListener('click', closeDrawer);

$('toggle-theme').addEventListener('click', () => {
  const current = document.documentElement.dataset.theme || 'system';
  const next = current === 'system' ? 'light' : current === 'light' ? 'dark' : 'system';
  setTheme(next);
});

$('session-search').addEventListener('input', (event) => {
  state.search = event.target.value;
  renderSessions();
});

document.addEventListener('keydown', (event) => {
  const mod = event.ctrlKey || event.metaKey;
  if (mod && event.key.toLowerCase() === 'k') {
    event.preventDefault();
    if (window.innerWidth < 700) openDrawer();
    $('session-search').focus();
  } else if (mod && event.altKey && event.key.toLowerCase() === 'n') {
    event.preventDefault();
    openNewDialog();
  } else if (mod && event.key.toLowerCase() === 'l') {
    event.preventDefault();
    $('composer-input').focus();
  } else if (event.key === 'Escape' && document.body.classList.contains('drawer-open')) {
    closeDrawer();
  }
});

setInterval(() => renderSessions(), 60000);
setTheme(document.documentElement.dataset.theme || 'system');
updateComposer();
acp.connect();
