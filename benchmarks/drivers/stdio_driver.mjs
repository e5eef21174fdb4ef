// The neutral stdio load driver of bench_stdio_neutral.py.
//
//   node benchmarks/drivers/stdio_driver.mjs '<JSON options>'
//
// Spawns a stdio MCP server and speaks raw JSON-RPC lines to it over its
// stdin/stdout pipes (no MCP client library). Options (one JSON object):
//   command, env   the server's argv and environment (env null: ours)
//   spawns         how many times to spawn it and time spawn -> initialize answered
//                  (each then closed), before the measured process
//   concurrencies  e.g. [1, 8, 64, 256]: calls in flight, one row each
//   warmup, seconds   per row; prime: extra warm-up of the first row
//   clockTicks     of /proc/<pid>/stat
// The measured process: initialize + notifications/initialized, then per
// concurrency `tools/call` of `echo` by that many callers back-to-back for
// warmup + seconds; the calls completing inside the measured window count.
// Requests made in one turn of the event loop go out in one write. Prints one
// JSON line per row, then one summary line:
//   {"kind":"calls","concurrency":..,"calls":..,"seconds":..,"calls_per_s":..,"mean_us":..,
//    "p50_us":..,"p99_us":..,"server_cpu_us":..,"driver_cpu_us":..}
//   {"kind":"process","spawn_ms":[..],"peak_rss_mb":..,"exit":..}
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { measure } from './_measure.mjs';

const HANDSHAKE_VERSION = '2025-11-25';
const PAYLOAD = 'hello, benchmark';
const STOP_MS = 5000;

const opts = JSON.parse(process.argv[2]);

function peakRssMb(pid) {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : null;
}

/** A server process and a JSON-RPC line connection to it. */
class Server {
  constructor() {
    this.child = spawn(opts.command[0], opts.command.slice(1), {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: opts.env ?? process.env,
    });
    this.pending = new Map();
    this.nextId = 1;
    this.out = [];
    this.flushing = false;
    this.carry = '';
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve(code ?? signal)));
    this.child.on('error', (error) => this.failAll(error));
    this.child.stdin.on('error', (error) => this.failAll(error));
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk) => this.received(chunk));
    this.child.stdout.on('end', () => this.failAll(new Error('the server closed its stdout')));
  }

  failAll(error) {
    for (const { reject } of this.pending.values()) reject(error);
    this.pending.clear();
  }

  received(chunk) {
    const lines = (this.carry + chunk).split('\n');
    this.carry = lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      if (message.id === undefined || message.method !== undefined) continue; // notifications, requests
      const waiter = this.pending.get(message.id);
      if (waiter === undefined) continue;
      this.pending.delete(message.id);
      if (message.error !== undefined) waiter.reject(new Error(JSON.stringify(message.error)));
      else waiter.resolve(message.result);
    }
  }

  send(line) {
    this.out.push(line);
    if (!this.flushing) {
      this.flushing = true;
      queueMicrotask(() => {
        this.flushing = false;
        const data = this.out.length === 1 ? this.out[0] : this.out.join('');
        this.out = [];
        this.child.stdin.write(data);
      });
    }
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send(`{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}\n`);
    });
  }

  async initialize() {
    const result = await this.request(
      'initialize',
      JSON.stringify({
        protocolVersion: HANDSHAKE_VERSION,
        capabilities: {},
        clientInfo: { name: 'bench-stdio-driver', version: '1.0' },
      }),
    );
    this.send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    return result;
  }

  /** Close stdin (every server stops at EOF); SIGKILL if it lingers. */
  async stop() {
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_MS);
    const status = await this.exited;
    clearTimeout(timer);
    return status;
  }
}

// `tool`: the echo tool's name (a gateway prefixes it with its server's name).
const CALL_PARAMS = JSON.stringify({ name: opts.tool ?? 'echo', arguments: { text: PAYLOAD } });

async function runRow(server, concurrency, warmup) {
  const row = await measure({
    call: () => server.request('tools/call', CALL_PARAMS),
    concurrency,
    warmup,
    seconds: opts.seconds,
    pid: server.child.pid,
    clockTicks: opts.clockTicks,
  });
  return { kind: 'calls', ...row };
}

async function main() {
  const spawnMs = [];
  for (let i = 0; i < opts.spawns; i++) {
    const begin = performance.now();
    const server = new Server();
    await server.initialize();
    spawnMs.push(Math.round((performance.now() - begin) * 100) / 100);
    await server.stop();
  }
  const server = new Server();
  let rss = null;
  let exit = null;
  try {
    await server.initialize();
    const check = await server.request('tools/call', CALL_PARAMS);
    if (check?.content?.[0]?.text !== PAYLOAD) throw new Error(`unexpected answer ${JSON.stringify(check)}`);
    let prime = opts.prime;
    for (const concurrency of opts.concurrencies) {
      const row = await runRow(server, concurrency, opts.warmup + prime);
      prime = 0;
      process.stdout.write(`${JSON.stringify(row)}\n`);
    }
    rss = peakRssMb(server.child.pid);
  } finally {
    exit = await server.stop();
  }
  process.stdout.write(`${JSON.stringify({ kind: 'process', spawn_ms: spawnMs, peak_rss_mb: rss, exit })}\n`);
}

main().catch((error) => {
  process.stderr.write(`stdio_driver: ${error.stack || error}\n`);
  process.exitCode = 1;
});
