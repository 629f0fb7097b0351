// The one API client of the portal: every call of the EGS REST API the portal makes is a function
// here (named after libegs's egs_client_* calls, include/egs/egs.h), and only this module builds URLs.
// It speaks the envelope {statusCode, status, message, data, error}: a call resolves to `data` or
// rejects with an ApiError carrying error.errorKey, error.message and error.data.field.
//
// The session: the API key is exchanged for a bearer token (POST /api/v1/auth).  The token and its
// expiry live in sessionStorage only (gone with the tab); the key itself stays in memory, to renew
// the token before it expires, and is never stored.  After a reload the token serves until it
// expires, then the user signs in again.

const BASE = '/api/v1';
const STORE = 'egs.session';

export class ApiError extends Error {
  constructor(status, key, message, field) {
    super(message || key || `HTTP ${status}`);
    this.status = status;
    this.key = key || '';
    this.field = field || '';
  }
}

let session = null; // {token, expiresAt (ms, server clock), me}
let apiKey = null; // memory only
let renewTimer = null;
const listeners = new Set();

function notify() {
  for (const fn of listeners) fn(session);
}

/** Calls fn(session) whenever the session changes (sign-in, renewal, sign-out); returns an unsubscribe. */
export function onSession(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function currentSession() {
  return session;
}

function save() {
  if (session) sessionStorage.setItem(STORE, JSON.stringify({ token: session.token, expiresAt: session.expiresAt }));
  else sessionStorage.removeItem(STORE);
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? '?' + s : '';
}

async function parse(res) {
  let doc = null;
  try {
    doc = await res.json();
  } catch {
    throw new ApiError(res.status, 'BAD_RESPONSE', `the server answered ${res.status} without a JSON envelope`);
  }
  if (!res.ok || (doc && doc.status === 'Error')) {
    const e = (doc && doc.error) || {};
    throw new ApiError(res.status, e.errorKey, e.message || (doc && doc.message), e.data && e.data.field);
  }
  return doc ? doc.data : null;
}

async function request(method, path, { params, body, retry = true } = {}) {
  const headers = {};
  if (session) headers.Authorization = 'Bearer ' + session.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(BASE + path + query(params), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  try {
    return await parse(res);
  } catch (e) {
    if (e.status === 401 && session && path !== '/auth') {
      if (retry && apiKey) {
        try {
          await authenticate(apiKey); // the token lapsed (a dev clock jumped, a laptop slept): renew once
        } catch (a) {
          signOut(`Signed out: ${a.message}`); // the key itself was deleted or expired
          throw a;
        }
        return request(method, path, { params, body, retry: false });
      }
      signOut('Your session has expired: sign in again.');
    }
    throw e;
  }
}

async function authenticate(key) {
  const res = await fetch(BASE + '/auth', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiKey: key }),
  });
  const data = await parse(res);
  const exp = Date.parse(res.headers.get('X-Token-Expires-At') || '') || Date.now() + 3600e3;
  session = { ...(session || {}), token: data.token, expiresAt: exp };
  save();
  return session;
}

function scheduleRenewal() {
  clearTimeout(renewTimer);
  if (!session || !apiKey || !session.me) return;
  // Renew when four fifths of the token's life (in the server's clock) have passed.
  const left = session.expiresAt - session.me.serverTime * 1000;
  renewTimer = setTimeout(async () => {
    try {
      await authenticate(apiKey);
      session.me = await egs.whoami();
      notify();
      scheduleRenewal();
    } catch {
      /* the next call renews on its 401 */
    }
  }, Math.max(5000, left * 0.8));
}

/** Signs in with an API key: token, then who the key is.  Rejects with ApiError (field apiKey). */
export async function signIn(key) {
  session = null;
  try {
    await authenticate(key.trim());
    session.me = await egs.whoami();
  } catch (e) {
    session = null;
    save();
    if (!e.field) e.field = 'apiKey';
    throw e;
  }
  apiKey = key.trim();
  scheduleRenewal();
  notify();
  return session;
}

/** Restores a session of this tab (after a reload); false when there is none or it has expired. */
export async function restore() {
  const raw = sessionStorage.getItem(STORE);
  if (!raw) return false;
  try {
    const s = JSON.parse(raw);
    session = { token: s.token, expiresAt: s.expiresAt };
    session.me = await egs.whoami();
    notify();
    return true;
  } catch {
    session = null;
    save();
    return false;
  }
}

export let signOutReason = '';
export function signOut(reason = '') {
  signOutReason = reason;
  session = null;
  apiKey = null;
  clearTimeout(renewTimer);
  save();
  notify();
}

const get = (path, params) => request('GET', path, { params });
const post = (path, body) => request('POST', path, { body });
const put = (path, body) => request('PUT', path, { body });
const del = (path, body) => request('DELETE', path, { body });

/** The API, one function per call (libegs names where libegs has the call). */
export const egs = {
  whoami: () => get('/auth/whoami'),
  // inventory and clusters
  inventory: () => get('/inventory/list'),
  inventoryWorkspace: (sliceName) => get('/inventory', { sliceName }),
  nodes: (clusterName) => get('/nodes', { clusterName }),
  clusters: () => get('/clusters'),
  clusterRegister: (spec) => post('/clusters', spec),
  clusterUpdate: (spec) => put('/clusters', spec),
  schedule: (clusterName) => get('/schedule', { clusterName }),
  // projects and keys
  projects: () => get('/projects'),
  projectCreate: (projectName) => post('/projects', { projectName }),
  apiKeys: () => get('/api-key/list'),
  apiKeyCreate: (spec) => post('/api-key', spec),
  apiKeyDelete: (keyId) => del('/api-key', { keyId }),
  // slices (workspaces)
  workspaceList: () => get('/slice-workspace/list'),
  workspaceGet: (workspaceName) => get('/slice-workspace', { workspaceName }),
  workspaceCreate: (spec) => post('/slice-workspace', spec),
  workspaceUpdate: (changes) => put('/slice-workspace', changes),
  workspaceDelete: (workspaceName) => del('/slice-workspace', { workspaceName }),
  kubeconfig: (workspaceName, clusterName) => post('/slice-workspace/kube-config', { workspaceName, clusterName }),
  // policies
  policyGet: (workspaceName) => get('/slice-workspace/policy', { workspaceName }),
  policySet: (body) => put('/slice-workspace/policy', body),
  policyDelete: (workspaceName) => del('/slice-workspace/policy', { workspaceName }),
  policyGlobal: () => get('/settings/policy'),
  policyGlobalSet: (body) => put('/settings/policy', body),
  // GPU provision requests
  gprCreate: (request) => post('/gpr', request),
  gprUpdate: (gprId, changes) => put('/gpr', { gprId, ...changes }),
  gprCancel: (gprId) => del('/gpr', { gprId }),
  gprRelease: (gprId) => put('/gpr', { gprId, earlyRelease: true }),
  gprExtend: (gprId, extendBy) => put('/gpr', { gprId, extendBy }),
  gprStatus: (gprId) => get('/gpr', { gprId }),
  gprList: (sliceName) => get('/gpr/list', { sliceName }),
  // One page: { limit, continue } -> { items, continue } (null on the last page), oldest first.
  gprPage: (sliceName, page) => get('/gpr/list', { sliceName, ...page }),
  gprWaittime: (request) => post('/gpr/waittime', request),
  gprApprove: (gprId) => post('/gpr/approve', { gprId }),
  gprReject: (gprId, reason) => post('/gpr/reject', { gprId, reason }),
  gprEvict: (gprId, reason) => post('/gpr/evict', { gprId, reason }),
  queue: (params) => get('/queue', params),
  queueTop: (gprId) => post('/queue/top', { gprId }),
  // observability
  events: (filter) => get('/events', filter),
  gpuTable: (params) => get('/gpus/table', params),
  gpuSeries: (uuid, window = '1h') => get('/gpus/series', { uuid, window }),
  workloads: (params) => get('/workloads', params),
  models: (params) => get('/models', params),
  alerts: (params) => get('/alerts', params),
  usage: (params) => get('/usage', params),
  prices: () => get('/prices'),
  priceSet: (body) => put('/prices', body),
  insights: (params) => get('/insights/queue', params),
};

/**
 * Follows GET /api/v1/events/watch (server-sent events) with the bearer token (EventSource cannot
 * send one, so this reads the stream with fetch).  Calls onEvent(event) for each event and
 * reconnects after a drop from the last id seen.  Returns a function that stops it.
 */
export function watchEvents(filter, onEvent, onState = () => {}) {
  let stopped = false, lastId = null, ctrl = null, delay = 500;
  async function run() {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const headers = { Accept: 'text/event-stream' };
        if (session) headers.Authorization = 'Bearer ' + session.token;
        if (lastId !== null) headers['Last-Event-ID'] = String(lastId);
        const res = await fetch(BASE + '/events/watch' + query(filter), { headers, signal: ctrl.signal });
        if (!res.ok || !res.body) throw new ApiError(res.status, 'WATCH_FAILED', `event stream answered ${res.status}`);
        onState(true);
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('id:')) lastId = line.slice(3).trim();
              else if (line.startsWith('data:')) data += line.slice(5).trim();
            }
            if (data) {
              try {
                onEvent(JSON.parse(data));
              } catch {
                /* a message we cannot read is skipped, the stream goes on */
              }
            }
          }
        }
      } catch {
        /* reconnect below */
      }
      onState(false);
      if (stopped) break;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  }
  run();
  return () => {
    stopped = true;
    if (ctrl) ctrl.abort();
  };
}
