// Loads the benchmarks' npm packages from the project's pinned npm peers
// (tests/interop/package.json + package-lock.json, installed by
// `bash scripts/setup-interop`), wherever the script using them lives.
// BENCH_NPM_DIR overrides the folder holding that package.json.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const dir = process.env.BENCH_NPM_DIR || join(here, '..', '..', 'tests', 'interop');

/** `require` resolving from the pinned npm peers' folder. */
export const requirePinned = createRequire(join(dir, 'package.json'));

/** Calls `onEnd` once stdin reaches EOF: the process that started us went away. */
export function onStdinEnd(onEnd) {
  process.stdin.on('end', onEnd);
  process.stdin.on('error', onEnd);
  process.stdin.resume();
}
