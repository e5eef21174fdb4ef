'use strict';
/*
 * Keep a Node process's TCP servers on loopback (preload with
 * `node --require tests/interop/loopback.cjs ...`).
 *
 * Peers such as server-everything (HTTP/SSE modes), supergateway and the
 * conformance suite's mock servers call `listen(port)` without a host, which
 * binds every interface. This preload rewrites every TCP `listen` of
 * `net.Server` (and so of http/https/express servers) to host 127.0.0.1,
 * whatever host the caller asked for. Unix sockets, pipes, handles and file
 * descriptors are left alone.
 *
 * Giving `listen` a host makes Node resolve it with `dns.lookup` before
 * binding, which is asynchronous: `server.address()` would read null right
 * after `listen()` returns (harnesses that call `listen(0)` and read the port
 * at once then see a null port). So `dns.lookup` answers the loopback names
 * (`127.0.0.1`, `localhost`) itself, calling back before it returns, with the
 * result shape the caller asked for (`all: true` gives an array; `family`
 * 4/6/'IPv4'/'IPv6' is honoured). Every other name goes to the real resolver.
 *
 * Set LOOPBACK_PRELOAD_DEBUG=1 to log each rewritten listen on stderr.
 */

const dns = require('node:dns');
const net = require('node:net');
const util = require('node:util');

const LOOPBACK_V4 = '127.0.0.1';
const LOOPBACK_V6 = '::1';
const debug = process.env.LOOPBACK_PRELOAD_DEBUG === '1';

// ------------------------------------------------------------------ listen

function isPortLike(value) {
  if (value === undefined || value === null || typeof value === 'number') return true;
  return typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value));
}

/** The arguments of a TCP listen rewritten onto 127.0.0.1, or null to leave them alone. */
function onLoopback(args) {
  const callback = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
  const rest = callback === undefined ? args.slice() : args.slice(0, -1);
  const first = rest[0];
  let options;
  if (first !== null && typeof first === 'object') {
    // (handle | server | {fd} | {path}) are not TCP ports.
    if (first._handle || first.handle || typeof first.fd === 'number' || first.path != null) return null;
    if (!('port' in first) && !('host' in first)) return null;
    options = { ...first, host: LOOPBACK_V4 };
    if (options.port === undefined || options.port === null) options.port = 0;
  } else if (rest.length === 0 || isPortLike(first)) {
    // ([port][, host][, backlog]): the host, if any, is replaced.
    options = { port: first === undefined || first === null ? 0 : first, host: LOOPBACK_V4 };
    const backlog = typeof rest[1] === 'number' ? rest[1] : typeof rest[2] === 'number' ? rest[2] : undefined;
    if (backlog !== undefined) options.backlog = backlog;
  } else {
    return null; // a pipe or unix socket path
  }
  return callback === undefined ? [options] : [options, callback];
}

const originalListen = net.Server.prototype.listen;
net.Server.prototype.listen = function listen(...args) {
  const rewritten = onLoopback(args);
  if (rewritten !== null && debug) {
    process.stderr.write(`[loopback] listen(${util.inspect(args[0])}) -> ${util.inspect(rewritten[0])}\n`);
  }
  return originalListen.apply(this, rewritten === null ? args : rewritten);
};

// ------------------------------------------------------------- dns.lookup

function requestedFamily(options) {
  if (typeof options === 'number') return options;
  if (options === null || typeof options !== 'object') return 0;
  if (options.family === 'IPv4') return 4;
  if (options.family === 'IPv6') return 6;
  return Number(options.family) || 0;
}

/** [address, family] for a loopback name, or null for the real resolver. */
function loopbackAnswer(hostname, options) {
  if (typeof hostname !== 'string') return null;
  const family = requestedFamily(options);
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (name === LOOPBACK_V4) return family === 6 ? null : [LOOPBACK_V4, 4];
  if (name === 'localhost') return family === 6 ? [LOOPBACK_V6, 6] : [LOOPBACK_V4, 4];
  return null;
}

function wantsAll(options) {
  return options !== null && typeof options === 'object' && options.all === true;
}

const originalLookup = dns.lookup;
function lookup(hostname, options, callback) {
  const cb = typeof options === 'function' ? options : callback;
  const opts = typeof options === 'function' ? undefined : options;
  const answer = typeof cb === 'function' ? loopbackAnswer(hostname, opts) : null;
  if (answer === null) return originalLookup.apply(dns, arguments);
  const [address, family] = answer;
  // Called back before returning, on purpose (see the header).
  if (wantsAll(opts)) cb(null, [{ address, family }]);
  else cb(null, address, family);
  return {};
}
Object.defineProperty(lookup, util.promisify.custom, {
  value: (hostname, options) => {
    const answer = loopbackAnswer(hostname, options);
    if (answer === null) return util.promisify(originalLookup)(hostname, options);
    const [address, family] = answer;
    return Promise.resolve(wantsAll(options) ? [{ address, family }] : { address, family });
  },
});
dns.lookup = lookup;

if (dns.promises && typeof dns.promises.lookup === 'function') {
  const originalPromiseLookup = dns.promises.lookup;
  dns.promises.lookup = function promisesLookup(hostname, options) {
    const answer = loopbackAnswer(hostname, options);
    if (answer === null) return originalPromiseLookup.apply(dns.promises, arguments);
    const [address, family] = answer;
    return Promise.resolve(wantsAll(options) ? [{ address, family }] : { address, family });
  };
}
