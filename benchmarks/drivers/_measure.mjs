// The load loop and the row of both Node drivers.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** CPU time (utime + stime, in clock ticks) a process (or several: their sum) has used so far. */
export function cpuTicks(pid) {
  if (Array.isArray(pid)) return pid.reduce((sum, one) => sum + cpuTicks(one), 0);
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // fields 14 and 15 of proc(5)
}

/** System CPU time (stime, in clock ticks) of a process (or several: their sum). */
export function sysTicks(pid) {
  if (Array.isArray(pid)) return pid.reduce((sum, one) => sum + sysTicks(one), 0);
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]);
}

function percentile(sorted, q) {
  const rank = Math.max(1, Math.ceil((q / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

const round1 = (x) => Math.round(x * 10) / 10;

/**
 * `concurrency` callers run `call()` (or each its own `caller()`) back-to-back for `warmup + seconds`; the
 * calls that complete inside the measured window count (the window is
 * extended until one has, if none did in time). The window starts and
 * ends on timers, where the server's CPU time (`pid`'s /proc stat, `clockTicks`
 * a second; `pid` may be a list: their sum, for a server made of several
 * processes) and the driver's own are sampled. Returns the row's figures.
 */
export async function measure({ call, caller: makeCall, concurrency, warmup, seconds, pid, clockTicks }) {
  const serverTicks = () => cpuTicks(pid);
  // With a list of pids, each one's ticks too (the split of the server side's CPU).
  const eachTicks = () => (Array.isArray(pid) ? pid.map((one) => cpuTicks(one)) : []);
  let each0 = [];
  let each1 = [];
  const latencies = [];
  let measuring = false;
  let stopped = false;
  let t0 = 0;
  let t1 = 0;
  let cpu0 = 0;
  let cpu1 = 0;
  let sys0 = 0;
  let sys1 = 0;
  let own0 = null;
  let own1 = null;
  const startTimer = setTimeout(() => {
    cpu0 = serverTicks();
    sys0 = sysTicks(pid);
    each0 = eachTicks();
    own0 = process.cpuUsage();
    t0 = performance.now();
    measuring = true;
  }, warmup * 1e3);
  // The window lasts `seconds`, and on a machine too busy for any call to
  // complete in that time, until the first one does.
  let extended = false;
  function endWindow() {
    t1 = performance.now();
    cpu1 = serverTicks();
    sys1 = sysTicks(pid);
    each1 = eachTicks();
    own1 = process.cpuUsage(own0);
    measuring = false;
    stopped = true;
  }
  const endTimer = setTimeout(
    () => {
      if (latencies.length) endWindow();
      else extended = true;
    },
    (warmup + seconds) * 1e3,
  );
  async function caller() {
    const callOnce = makeCall ? makeCall() : call; // makeCall: each caller's own call function
    while (!stopped) {
      const begin = performance.now();
      await callOnce();
      if (measuring) {
        latencies.push(performance.now() - begin);
        if (extended) endWindow();
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, caller));
  } finally {
    clearTimeout(startTimer);
    clearTimeout(endTimer);
  }
  const window = (t1 - t0) / 1e3;
  const calls = latencies.length;
  latencies.sort((a, b) => a - b);
  const sum = latencies.reduce((a, b) => a + b, 0);
  return {
    concurrency,
    calls,
    seconds: Math.round(window * 1e3) / 1e3,
    calls_per_s: round1(calls / window),
    mean_us: round1((sum / calls) * 1e3),
    p50_us: round1(percentile(latencies, 50) * 1e3),
    p99_us: round1(percentile(latencies, 99) * 1e3),
    server_cpu_us: round1((((cpu1 - cpu0) / clockTicks) * 1e6) / calls),
    // The kernel's share of the server's CPU (system calls, wake-ups) and of the driver's.
    server_sys_us: round1((((sys1 - sys0) / clockTicks) * 1e6) / calls),
    driver_cpu_us: round1((own1.user + own1.system) / calls),
    driver_sys_us: round1(own1.system / calls),
    ...(each1.length
      ? { server_cpu_split_us: each1.map((t, i) => round1((((t - each0[i]) / clockTicks) * 1e6) / calls)) }
      : {}),
  };
}
