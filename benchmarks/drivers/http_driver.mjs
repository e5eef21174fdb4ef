// The neutral Streamable HTTP load driver of bench_http_neutral.py.
//
//   node benchmarks/drivers/http_driver.mjs '<JSON options>'
//
// Raw JSON-RPC over an undici keep-alive Pool (its dispatch API; undici is pinned in
// tests/interop/package.json), no MCP client library. Options (one JSON object):
//   url            the server's MCP endpoint
//   initUrl        optional: perform the handshake there (another node of a cluster),
//                  then call `url` with that session
//   eras           ["handshake", "2026-07-28"]: handshake = initialize +
//                  notifications/initialized, then calls carrying Mcp-Session-Id and
//                  MCP-Protocol-Version; 2026-07-28 = stateless calls carrying _meta
//                  protocolVersion / clientCapabilities / clientInfo and the mirrored
//                  MCP-Protocol-Version / Mcp-Method / Mcp-Name headers
//   handshake      false: send the handshake era's calls without performing it (the
//                  floor), with the fixed session id `floorSession`
//   concurrencies  e.g. [1, 64]: callers in flight, one row each
//   connections    the pool's keep-alive connections (64)
//   warmup, seconds   per row
//   prime          extra warm-up of the first row (the server's and the driver's code is cold)
//   serverPid, clockTicks   for the server's CPU time (/proc/<pid>/stat utime+stime; a list
//                  of pids: their sum, e.g. a parent and its worker processes)
//   sessions       handshake era: this many sessions (default 1), opened at once, caller i
//                  using session i mod sessions (with several server processes, sessions
//                  spread over them)
//   pinSessions    handshake era: each session opened on a keep-alive connection of its own,
//                  and its calls sent there, instead of on any connection of the pool
//   rotate         with pinSessions: round robin per request, a session's calls on every
//                  connection. "connection" (or true): each call on the next of those
//                  connections in turn, waiting behind the call that connection carries,
//                  if any. "process": each call to the next server process in turn (as
//                  balanceWorkers found them; without it, all connections are one), on a
//                  connection to it that carries no call (else the first to come free), as
//                  a round-robin balancer sends each request to the next server over a
//                  free connection to it (haproxy's balance roundrobin)
//   balanceWorkers with pinSessions: N server processes share the port; the sessions'
//                  connections are spread evenly over them (as a round-robin balancer
//                  would), not as the kernel's accept race falls: each new connection
//                  asks GET /readyz which process it reached (its cluster node) and is
//                  kept only while that process has under sessions/N of them (at most
//                  20 tries per connection kept); a row then reports connections_per_process
// Every row first checks one answer whole (the echoed text), then runs its callers
// back-to-back for warmup + seconds; the calls that complete inside the measured
// window count. Prints one JSON line per row on stdout:
//   {"era":..,"concurrency":..,"calls":..,"seconds":..,"calls_per_s":..,"mean_us":..,
//    "p50_us":..,"p99_us":..,"server_cpu_us":..,"driver_cpu_us":..,"content_type":..}
import { measure } from './_measure.mjs';
import { requirePinned } from './_npm.mjs';

const { Pool } = requirePinned('undici');

const HANDSHAKE_VERSION = '2025-11-25';
const MODERN = '2026-07-28';
const PAYLOAD = 'hello, benchmark';
const CLIENT_INFO = { name: 'bench-http-driver', version: '1.0' };

const opts = JSON.parse(process.argv[2]);
const target = new URL(opts.url);
const pool = new Pool(target.origin, { connections: opts.connections, pipelining: 1 });
const path = target.pathname;
const initTarget = opts.initUrl ? new URL(opts.initUrl) : target;
const initPool = opts.initUrl ? new Pool(initTarget.origin, { connections: 1, pipelining: 1 }) : pool;
/** The sessions' own connections (pinSessions). */
const pinned = [];
/** Connections opened ahead and spread over the server processes (balanceWorkers). */
const balanced = [];
/** How balanceWorkers spread them: connections per process. */
let split = null;

/** The cluster node (server process) that a one-connection pool reached. */
async function nodeOf(via) {
  const { statusCode, body } = await via.request({ path: new URL('readyz', target).pathname, method: 'GET' });
  const text = await body.text();
  if (statusCode !== 200) throw new Error(`readyz: HTTP ${statusCode} ${text}`);
  return JSON.parse(text).cluster.node;
}

/** `count` connections, at most ceil(count / workers) on each server process. */
async function balanceConnections(count, workers) {
  const most = Math.ceil(count / workers);
  const per = new Map();
  for (let tries = 0; balanced.length < count; tries++) {
    if (tries >= 20 * count) throw new Error(`balanceWorkers: no even spread in ${tries} connections`);
    const via = new Pool(target.origin, { connections: 1, pipelining: 1 });
    const node = await nodeOf(via);
    if ((per.get(node) || 0) < most) {
      per.set(node, (per.get(node) || 0) + 1);
      via.node = node;
      balanced.push(via);
    } else {
      await via.close();
    }
  }
  split = Object.fromEntries(per);
}

/** rotate "process": the sessions' connections by the server process they reached
 * (balanceWorkers; without it, one group: a single server process), and
 * `send(fn)`, which runs `fn(connection)` on a free connection of the next
 * process in turn (waiting for one only while all of that process's carry a call). */
function serverProcesses(shapes) {
  const nodes = new Map();
  for (const { pool: via } of shapes) {
    const node = via.node ?? '';
    if (!nodes.has(node)) nodes.set(node, { free: [], waiting: [] });
    nodes.get(node).free.push(via);
  }
  const order = [...nodes.values()];
  let next = 0;
  return {
    async send(fn) {
      const node = order[next++ % order.length];
      const via = node.free.pop() || (await new Promise((resolve) => node.waiting.push(resolve)));
      try {
        return await fn(via);
      } finally {
        const waiter = node.waiting.shift();
        if (waiter) waiter(via);
        else node.free.push(via);
      }
    },
  };
}

/** The JSON-RPC answer in a body, JSON or an SSE stream (its first non-empty `data:` answer). */
function answerOf(text, contentType) {
  if (contentType.startsWith('text/event-stream')) {
    for (const line of text.split('\n')) {
      if (line.startsWith('data:') && line.slice(5).trim()) {
        const message = JSON.parse(line.slice(5));
        if ('result' in message || 'error' in message) return message;
      }
    }
    throw new Error(`no answer in the SSE stream: ${JSON.stringify(text)}`);
  }
  return JSON.parse(text);
}

/** One POST on the pool, through undici's dispatch API (no response stream
 * object, about a third less driver CPU per call than `pool.request`). */
function post(headers, body, via = pool, at = path) {
  return new Promise((resolve, reject) => {
    let status = 0;
    let responseHeaders = {};
    const chunks = [];
    via.dispatch(
      { path: at, method: 'POST', headers, body },
      {
        onRequestStart() {},
        onResponseStart(_controller, statusCode, received) {
          status = statusCode;
          responseHeaders = received;
        },
        onResponseData(_controller, chunk) {
          chunks.push(chunk);
        },
        onResponseEnd() {
          const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString();
          resolve({ status, headers: responseHeaders, text });
        },
        onResponseError(_controller, error) {
          reject(error);
        },
      },
    );
  });
}

const BASE_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** Headers and body prefix of one era's tools/call (the id is spliced in per call). */
async function callShape(era) {
  const params = { name: 'echo', arguments: { text: PAYLOAD } };
  if (era === MODERN) {
    params._meta = {
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
    };
    const headers = {
      ...BASE_HEADERS,
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
    };
    return { headers, params };
  }
  const via = opts.pinSessions
    ? balanced.shift() || new Pool(target.origin, { connections: 1, pipelining: 1 })
    : initPool;
  if (opts.pinSessions) pinned.push(via);
  if (opts.handshake === false) {
    const headers = {
      ...BASE_HEADERS,
      'mcp-session-id': opts.floorSession,
      'mcp-protocol-version': HANDSHAKE_VERSION,
    };
    return { headers, params };
  }
  const init = await post(
    BASE_HEADERS,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: HANDSHAKE_VERSION, capabilities: {}, clientInfo: CLIENT_INFO },
    }),
    via,
    opts.pinSessions ? path : initTarget.pathname,
  );
  if (init.status !== 200) throw new Error(`initialize: HTTP ${init.status} ${init.text}`);
  const version = answerOf(init.text, init.headers['content-type'] || '').result.protocolVersion;
  const session = init.headers['mcp-session-id'];
  const headers = { ...BASE_HEADERS, 'mcp-protocol-version': version };
  if (session !== undefined) headers['mcp-session-id'] = session;
  const initialized = await post(
    headers,
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    via,
    opts.pinSessions ? path : initTarget.pathname,
  );
  if (initialized.status !== 202 && initialized.status !== 200) {
    throw new Error(`notifications/initialized: HTTP ${initialized.status} ${initialized.text}`);
  }
  return { headers, params, pool: opts.pinSessions ? via : pool };
}

async function runRow(era, shapes, concurrency, warmup) {
  const shape = shapes[0];
  const tail = `,"method":"tools/call","params":${JSON.stringify(shape.params)}}`;
  let nextId = 1;
  const body = () => `{"jsonrpc":"2.0","id":${nextId++}${tail}`;

  const check = await post(shape.headers, body(), shape.pool);
  const contentType = check.headers['content-type'] || '';
  if (check.status !== 200) throw new Error(`${era} tools/call: HTTP ${check.status} ${check.text}`);
  const first = answerOf(check.text, contentType);
  if (first.result?.content?.[0]?.text !== PAYLOAD) {
    throw new Error(`${era} tools/call: unexpected answer ${check.text}`);
  }

  let nextCaller = 0;
  let nextConnection = 0;
  const processes = opts.rotate === 'process' && opts.pinSessions && era !== MODERN ? serverProcesses(shapes) : null;
  function caller() {
    const { headers, pool: own } = shapes[nextCaller++ % shapes.length];
    return async function call() {
      const { status, text } = processes
        ? await processes.send((via) => post(headers, body(), via))
        : await post(headers, body(), opts.rotate && pinned.length ? pinned[nextConnection++ % pinned.length] : own);
      if (status !== 200 || !text.includes('"result"')) throw new Error(`${era} tools/call: HTTP ${status} ${text}`);
    };
  }

  const row = await measure({
    caller,
    concurrency,
    warmup,
    seconds: opts.seconds,
    pid: opts.serverPid,
    clockTicks: opts.clockTicks,
  });
  return {
    era,
    ...row,
    content_type: contentType.split(';')[0],
    ...(split && era !== MODERN ? { connections_per_process: split } : {}),
  };
}

try {
  let prime = opts.prime;
  for (const era of opts.eras) {
    const count = era === MODERN ? 1 : opts.sessions || 1;
    if (era !== MODERN && opts.pinSessions && opts.balanceWorkers > 1) {
      await balanceConnections(count, opts.balanceWorkers);
    }
    // All at once, so that the pool opens a connection for each (with several
    // server processes, the sessions start on all of them).
    const shapes = await Promise.all(Array.from({ length: count }, () => callShape(era)));
    for (const concurrency of opts.concurrencies) {
      const row = await runRow(era, shapes, concurrency, opts.warmup + prime);
      prime = 0;
      process.stdout.write(`${JSON.stringify(row)}\n`);
    }
  }
} catch (error) {
  process.stderr.write(`http_driver: ${error.stack || error}\n`);
  process.exitCode = 1;
} finally {
  await pool.close();
  if (initPool !== pool) await initPool.close();
  await Promise.all(pinned.map((own) => own.close()));
}
