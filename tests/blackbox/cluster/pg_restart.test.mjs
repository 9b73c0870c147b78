// Losing the database: `pg_ctl restart -m fast` in the middle of a load on two nodes. The nodes must ride it
// out without being restarted: requests that fail in the outage get 503 problems with Retry-After, every job
// that got a 202 is there afterwards, and writes succeed again on both nodes. This test restarts a
// PostgreSQL server, so it starts one of its own (scripts/pg.sh) rather than the suite's shared one. It runs
// in the PostgreSQL pass only (`make blackbox-pg`).

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, startDaemon, api } from '../lib/daemon.mjs';
import { assertAllThere, assertUnavailable, sleep, submit, waitUntil } from '../lib/jobs.mjs';

const PG_SH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'scripts', 'pg.sh');
const CONFIG = `keys:
  - { key: "kc", tenant: c, role: client }
signingKey: "pg-restart-test-signing-key-0123456789abcdef"
webhooks: { secretKey: "Oam97DkNfLEKB6ZLxiOrA4QO50sGBbWMFMjv+5ehpZk=" }
`;

const pgDir = fs.mkdtempSync('/tmp/acceptd-pgr-');
const PORT = String(56000 + (process.pid % 1000));
const pgsh = (...args) => execFileSync('bash', [PG_SH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
after(() => {
    if (pgDir) pgsh('stop', pgDir);
});

describe('PostgreSQL restarted under load', () => {
    it('pg_ctl restart -m fast: nodes recover by themselves, 202s survive, failures are 503 with Retry-After', { timeout: 90_000 }, async () => {
        pgsh('start', pgDir, PORT);
        const store = pgsh('createdb', pgDir, PORT, 'acceptd');
        const nodes = [await startDaemon({ config: CONFIG, store }), await startDaemon({ config: CONFIG, store })];
        const clients = nodes.map((d) => api(d, 'kc'));
        const accepted = [];
        const failures = [];
        let stop = false;
        const load = Array.from({ length: 8 }, async (_, i) => {
            for (let n = 0; !stop; n++) {
                const r = await clients[(i + n) % 2].post('/v1/jobs', { type: 'r.job', payload: { i, n } });
                if (r.status === 202) accepted.push(r.json.id);
                else {
                    failures.push(r);
                    await sleep(20);
                }
            }
        });
        try {
            await waitUntil(() => accepted.length, (n) => n >= 200, { timeoutMs: 30_000, intervalMs: 10, what: '200 jobs before the restart' });
            const before = accepted.length;
            // Not execFileSync: the load must go on while the server restarts.
            await promisify(execFile)('bash', [PG_SH, 'restart', pgDir]);
            // Both nodes take writes again without being restarted.
            const t0 = accepted.length;
            await waitUntil(() => accepted.length, (n) => n >= t0 + 200, { timeoutMs: 30_000, intervalMs: 20, what: '200 more jobs after the restart' });
            stop = true;
            await Promise.all(load);
            assert.ok(accepted.length > before);
            for (const c of clients) await submit(c, { type: 'r.job', payload: { after: true } });
        } finally {
            stop = true;
            await Promise.all(load);
        }
        // What failed, failed with a 503 problem and Retry-After (and the outage did make some fail).
        assert.ok(failures.length > 0, 'no request failed: the restart was not noticed');
        assertUnavailable(failures);
        // Every 202 is there, on either node.
        await assertAllThere(clients, accepted);
        for (const d of nodes) {
            assert.deepEqual(await d.stop(), { code: 0, signal: null }, d.stderr.slice(-4000));
            assert.match(d.stderr, /store/i, 'the outage left no trace in the log');
        }
    });
});
