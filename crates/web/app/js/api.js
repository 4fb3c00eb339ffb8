// The small HTTP API of `dsh web` for what ACP lacks (docs/web.md): directory listing for the
// workspace picker, settings, the subagent tree. Same-origin JSON; writes carry a JSON body
// (a cross-site form cannot send one) and the server checks Origin on each of them.

async function call(method, path, body) {
  const init = { method, headers: { accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = (data && (data.error?.message || data.error || data.message)) || text || response.statusText;
    const error = new Error(typeof message === 'string' ? message : `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return data;
}

export const api = {
  status: () => call('GET', '/api/status'),
  folders: (path) => call('GET', `/api/folders${path ? `?path=${encodeURIComponent(path)}` : ''}`),
  recent: () => call('GET', '/api/recent'),
  sessions: () => call('GET', '/api/sessions'),
  settings: () => call('GET', '/api/settings'),
  saveSettings: (changes) => call('PUT', '/api/settings', changes),
};
