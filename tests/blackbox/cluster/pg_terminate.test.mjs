// The database ends the daemon's sessions: `pg_terminate_backend` on every PostgreSQL connection of two nodes
// (the writer's, the readers', the artifact service's, the cluster feed's), several times, under a load of submits
// and reads. The nodes must ride it out without being restarted: no request hangs and none is cut off, those that
// fail in the outage get 503 problems with Retry-After, every job that got a 202 is there afterwards, both nodes
// take writes again and say they are ready. Unlike a server restart (pg_restart.test.mjs) the server stays up: only
// the sessions go, each at any point of its work. It runs in the PostgreSQL pass only (`make blackbox-pg`).

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { it, startDaemon, api, freshStore } from '../lib/daemon.mjs';
import { assertAllThere, assertUnavailable, show, sleep, submit, waitUntil } from '../lib/jobs.mjs';

const CONFIG = `keys:
  - { key: "kc", tenant: c, role: client }
signingKey: "pg-terminate-test-signing-key-0123456789abc"
webhooks: { secretKey: "Oam97DkNfLEKB6ZLxiOrA4QO50sGBbWMFMjv+5ehpZk=" }
`;
const ROUNDS = 6;

/** Terminate every session the acceptd nodes hold on the database of url; how many there were. */
async function terminate(url) {
    const sql =
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database()" +
        " AND application_name = 'acceptd' AND pid <> pg_backend_pid()";
    const { stdout } = await promisify(execFile)('psql', ['-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql, url]);
    return Number(stdout.trim());
}

describe("PostgreSQL ends the daemon's sessions under load", () => {
    it('pg_terminate_backend: no request hangs, 202s survive, failures are 503 with Retry-After', { timeout: 120_000 }, async () => {
        const store = freshStore();
        const nodes = [await startDaemon({ config: CONFIG, store }), await startDaemon({ config: CONFIG, store })];
        const clients = nodes.map((d) => api(d, 'kc'));
        const accepted = [];
        const failures = [];
        let reads = 0;
        let stop = false;
        // Each worker submits, then reads back on the other node the job it last got a 202 for. A request that gets
        // no answer within 20 s throws (api()), and so does a connection the daemon drops: either fails the test.
        const load = Array.from({ length: 8 }, async (_, i) => {
            let last = null;
            for (let n = 0; !stop; n++) {
                const c = clients[(i + n) % 2];
                const r = await c.post('/v1/jobs', { type: 'r.job', payload: { i, n } });
                if (r.status === 202) {
                    accepted.push(r.json.id);
                    last = r.json.id;
                } else failures.push(r);
                if (last !== null) {
                    const g = await clients[(i + n + 1) % 2].get(`/v1/jobs/${last}`);
                    if (g.status === 200) reads++;
                    else failures.push(g);
                }
                if (r.status !== 202) await sleep(20);
            }
        });
        let terminated = 0;
        try {
            await waitUntil(() => accepted.length, (n) => n >= 200, { timeoutMs: 30_000, intervalMs: 10, what: '200 jobs before the first termination' });
            for (let k = 0; k < ROUNDS; k++) {
                terminated += await terminate(store);
                await sleep(300);
            }
            // Both nodes take writes again without being restarted.
            const t0 = accepted.length;
            await waitUntil(() => accepted.length, (n) => n >= t0 + 200, { timeoutMs: 30_000, intervalMs: 20, what: '200 more jobs after the terminations' });
            stop = true;
            await Promise.all(load);
            for (const c of clients) await submit(c, { type: 'r.job', payload: { after: true } });
        } finally {
            stop = true;
            await Promise.allSettled(load);
        }
        console.log('# stats', JSON.stringify({ terminated, accepted: accepted.length, reads, failures: failures.length, statuses: failures.map((r) => r.status).join(',') }));
        assert.ok(terminated >= ROUNDS, `only ${terminated} sessions were terminated in ${ROUNDS} rounds`);
        assert.ok(reads > 0, 'no read got an answer');
        // What failed, failed with a 503 problem and Retry-After.
        assertUnavailable(failures);
        // Every 202 is there, on either node.
        await assertAllThere(clients, accepted);
        for (const d of nodes) {
            const r = await api(d).get('/readyz');
            assert.equal(r.status, 200, show(r));
            assert.deepEqual(await d.stop(), { code: 0, signal: null }, d.stderr.slice(-4000));
        }
    });
});
