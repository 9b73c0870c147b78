// Black-box harness for `acceptd worker` processes: spawn one with given arguments and environment, keep
// its stderr, and make sure no worker outlives the test process.

import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const BIN = process.env.ACCEPTD_BIN ? path.resolve(process.env.ACCEPTD_BIN) : path.join(REPO_ROOT, 'build', 'acceptd');

const live = new Set();

/** SIGKILL every worker still running (also done when the test process exits). */
export function killWorkers() {
    for (const p of live) p.kill('SIGKILL');
    live.clear();
}
process.on('exit', killWorkers);

/**
 * Spawn `acceptd ARGS...` with env. Returns {proc, exited (promise of {code, signal}), stderr (getter, the
 * last 200 KB), stop(signal), stopClean()}.
 */
export function spawnWorker(args, env) {
    const proc = spawn(BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(proc);
    let stderr = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (c) => {
        stderr = (stderr + c).slice(-200_000);
    });
    proc.stdout.resume();
    const exited = new Promise((resolve) => {
        proc.on('exit', (code, signal) => {
            live.delete(proc);
            resolve({ code, signal });
        });
    });
    return {
        proc,
        exited,
        get stderr() {
            return stderr;
        },
        async stop(signal = 'SIGTERM') {
            if (live.has(proc)) proc.kill(signal);
            return exited;
        },
        /** SIGTERM and assert a clean exit (status 0; under ASan also no leak report). */
        async stopClean() {
            const r = await this.stop();
            assert.deepEqual(r, { code: 0, signal: null }, `worker exit\n${stderr}`);
        },
    };
}
