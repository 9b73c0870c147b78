// Cluster mode: three acceptd nodes sharing one PostgreSQL database (freshStore()). Only `make blackbox-pg` runs
// this folder: a SQLite store cannot be shared.
// Everything is checked through the HTTP API of the nodes, a real SSE client and a real webhook receiver.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, api, freshStore } from '../lib/daemon.mjs';
import { openSse, ids } from '../lib/sse.mjs';
import { startReceiver, webhookConfig, createEndpoint, stopClean } from '../lib/webhooks.mjs';
import {
    TERMINAL, complete, expectStatus, getJob, heartbeat, lease, leaseOne, listAll, mapLimit, show, sleep, submit, waitUntil,
} from '../lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1;
const KEYS = `signingKey: "cluster-test-signing-key-0123456789abcdef"
`;
const CONFIG = `keys:
  - { key: "kc", tenant: c, role: client }
  - { key: "kw", tenant: c, role: worker }
types:
  cl.job: { maxAttempts: 5 }
retryBackoff: 200ms
limits: { maxWaitSeconds: 5 }
${KEYS}webhooks: { secretKey: "Oam97DkNfLEKB6ZLxiOrA4QO50sGBbWMFMjv+5ehpZk=" }
`;

const nodes = [];
after(async () => {
    for (const d of nodes) await d.stop();
});

/** Three nodes on one fresh database. */
async function cluster(config = CONFIG, n = 3) {
    const store = freshStore();
    const out = [];
    for (let i = 0; i < n; i++) {
        const d = await startDaemon({ config, store });
        nodes.push(d);
        out.push(d);
    }
    return out;
}

describe('cluster: three nodes on one PostgreSQL database', () => {
    it('submit on A, lease on B (parked first), SSE on C sees every progress event and done', async () => {
        const [a, b, c] = await cluster();
        const ca = api(a, 'kc');
        const wb = api(b, 'kw');
        // B's worker parks before the job exists: the job must reach it from A's commit.
        const parked = lease(wb, ['cl.job'], { wait: 5, leaseSeconds: 30 });
        await sleep(200);
        const sub = await submit(ca, { type: 'cl.job', payload: { n: 1 } });
        const leased = expectStatus(await parked, 200);
        const l = leased.json.leases[0];
        assert.equal(l.job.id, sub.json.id, show(leased));

        const stream = await openSse(`${c.url}/v1/jobs/${l.job.id}/events`, { headers: { authorization: 'Bearer kc' } });
        assert.equal(stream.status, 200);
        await stream.waitFor((x) => x.events.length >= 1, 5000 * SLOW, 'the first event on C');
        const progress = [10, 25, 50, 75, 90];
        for (const p of progress) expectStatus(await heartbeat(wb, l.job.id, l.leaseId, { progress: p }), 200);
        await complete(wb, l.job.id, l.leaseId, { result: { done: true } });
        await stream.waitEnd(10_000 * SLOW);
        const seen = stream.events.filter((e) => e.event === 'progress').map((e) => JSON.parse(e.data).progress);
        assert.deepEqual(seen.filter((p) => progress.includes(p)), progress, stream.raw);
        const done = stream.events.at(-1);
        assert.equal(done.event, 'done', stream.raw);
        assert.equal(JSON.parse(done.data).status, 'succeeded', stream.raw);
        const got = ids(stream);
        assert.deepEqual(got, [...got].sort((x, y) => x - y), `ids out of order: ${got}`);
        assert.equal(new Set(got).size, got.length, `duplicate ids: ${got}`);
    });

    it('a change on A reaches B: B never answers 304 to an old ETag once it has heard, and its /v1/events gets it', async () => {
        const [a, b] = await cluster(CONFIG, 2);
        const ca = api(a, 'kc');
        const cb = api(b, 'kc');
        const id = (await submit(ca, { type: 'cl.job', payload: {} })).json.id;
        const first = expectStatus(await cb.get(`/v1/jobs/${id}`), 200); // now cached on B
        const etag = first.headers.get('etag');
        const feed = await openSse(`${b.url}/v1/events`, { headers: { authorization: 'Bearer kc' } });
        assert.equal(feed.status, 200);
        expectStatus(await ca.post(`/v1/jobs/${id}:cancel`), 200);
        const res = await waitUntil(() => cb.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag } }), (r) => r.status === 200,
            { timeoutMs: 3000, intervalMs: 5, what: 'B to hear of the cancel' });
        assert.equal(res.json.status, 'cancelled', show(res));
        assert.notEqual(res.headers.get('etag'), etag);
        // From then on B answers the new version, and its stream carried the change.
        for (let i = 0; i < 20; i++) assert.equal((await cb.get(`/v1/jobs/${id}`)).headers.get('etag'), res.headers.get('etag'));
        await feed.waitFor((x) => x.events.some((e) => JSON.parse(e.data).id === id && JSON.parse(e.data).status === 'cancelled'), 3000, 'the cancel on B\'s /v1/events');
        feed.close();
    });

    it('the same Idempotency-Key sent to two nodes at once yields one job', async () => {
        const [a, b] = await cluster(CONFIG, 2);
        const ca = api(a, 'kc');
        const cb = api(b, 'kc');
        for (let i = 0; i < 20; i++) {
            const key = `idem-${i}-${Date.now()}`;
            const body = { type: 'cl.job', payload: { i } };
            const rs = await Promise.all([ca, cb].map((c) => c.req('POST', '/v1/jobs', { body, headers: { 'idempotency-key': key } })));
            const ok = rs.filter((r) => r.status === 202 || r.status === 200);
            for (const r of rs) assert.ok([200, 202, 409].includes(r.status), show(r));
            assert.ok(ok.length >= 1, rs.map(show).join('\n'));
            assert.equal(new Set(ok.map((r) => r.json.id)).size, 1, `two jobs for one key: ${rs.map(show).join('\n')}`);
            // Once the first is committed, either node replays it.
            for (const c of [ca, cb]) {
                const again = await c.req('POST', '/v1/jobs', { body, headers: { 'idempotency-key': key } });
                assert.equal(again.json?.id, ok[0].json.id, show(again));
            }
        }
        const all = await listAll(ca, 'type=cl.job');
        assert.equal(all.length, 20, `jobs: ${all.length}`);
    });

    it('kill -9 of one node under load: no job lost, every job ends, each result accepted once', { timeout: 120_000 }, async () => {
        const [a, b, c] = await cluster();
        const clients = [a, b, c].map((d) => api(d, 'kc'));
        const accepted = [];
        let stopSubmitting = false;
        let victimDead = false;
        // Submitters spread over the three nodes; submits to the dead node fail and are not counted.
        const submitters = Array.from({ length: 6 }, async (_, i) => {
            for (let n = 0; !stopSubmitting; n++) {
                const c = clients[(i + n) % 3];
                if (c === clients[1] && victimDead) continue;
                try {
                    const r = await c.post('/v1/jobs', { type: 'cl.job', payload: { i, n } });
                    if (r.status === 202) accepted.push(r.json.id);
                } catch {
                    /* the node died under the request: no 202, nothing promised */
                }
            }
        });
        // Worker loops on each node, leasing with short leases; B's die with B.
        let stopWorking = false;
        const results = new Map(); // id -> times a complete was accepted (200)
        const workers = [a, b, c].flatMap((d, k) => [0, 1].map(async () => {
            const w = api(d, 'kw');
            while (!stopWorking) {
                if (k === 1 && victimDead) return;
                let r;
                try {
                    r = await lease(w, ['cl.job'], { wait: 1, leaseSeconds: 2 });
                } catch {
                    if (k === 1) return;
                    continue;
                }
                if (r.status !== 200) continue;
                for (const l of r.json.leases) {
                    await sleep(5);
                    try {
                        const done = await w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, result: { by: k } });
                        if (done.status === 200) results.set(l.job.id, (results.get(l.job.id) ?? 0) + 1);
                    } catch {
                        /* B died before answering: its lease runs out and another node's worker redoes it */
                    }
                }
            }
        }));
        await waitUntil(() => accepted.length, (n) => n >= 150, { timeoutMs: 30_000 * SLOW, intervalMs: 20, what: '150 accepted jobs' });
        b.kill9();
        victimDead = true;
        await b.waitExit();
        await waitUntil(() => accepted.length, (n) => n >= 300, { timeoutMs: 30_000 * SLOW, intervalMs: 20, what: '300 accepted jobs' });
        stopSubmitting = true;
        await Promise.all(submitters);

        const ca = clients[0];
        const deadline = Date.now() + 60_000 * SLOW;
        let jobs;
        for (;;) {
            jobs = await listAll(ca, 'type=cl.job');
            const open = jobs.filter((j) => !TERMINAL.includes(j.status));
            if (open.length === 0 && jobs.length >= accepted.length) break;
            assert.ok(Date.now() < deadline, `${open.length} jobs still open, e.g. ${JSON.stringify(open.slice(0, 2))}`);
            await sleep(200);
        }
        stopWorking = true;
        await Promise.all(workers);
        const listed = new Set(jobs.map((j) => j.id));
        const lost = accepted.filter((id) => !listed.has(id));
        assert.deepEqual(lost, [], 'jobs that got a 202 and are gone');
        assert.deepEqual(jobs.filter((j) => j.status !== 'succeeded').map((j) => `${j.id} ${j.status}`), []);
        for (const [id, n] of results) assert.equal(n, 1, `${id}: result accepted ${n} times`);
        // Each job's history: exactly one accepted result and never two live leases.
        await mapLimit(accepted, 16, async (id) => {
            const rows = expectStatus(await ca.get(`/v1/jobs/${id}/attempts`), 200).json.attempts;
            const ctx = `${id}: ${JSON.stringify(rows)}`;
            assert.equal(rows.filter((r) => r.outcome === 'succeeded').length, 1, ctx);
            for (let i = 0; i + 1 < rows.length; i++) {
                assert.notEqual(rows[i].endedAt, null, ctx);
                assert.ok(Date.parse(rows[i].endedAt) <= Date.parse(rows[i + 1].startedAt), `overlapping leases: ${ctx}`);
            }
        });
    });

    it('a lease taken on a node that dies runs out on the others, and the job is leased again there', async () => {
        const [a, b] = await cluster(CONFIG, 2);
        const ca = api(a, 'kc');
        const id = (await submit(ca, { type: 'cl.job', payload: {} })).json.id;
        const first = await leaseOne(api(b, 'kw'), ['cl.job'], { expectId: id, leaseSeconds: 1 });
        b.kill9();
        await b.waitExit();
        const again = await leaseOne(api(a, 'kw'), ['cl.job'], { expectId: id, wait: 5, leaseSeconds: 30 });
        assert.notEqual(again.leaseId, first.leaseId);
        const rows = expectStatus(await ca.get(`/v1/jobs/${id}/attempts`), 200).json.attempts;
        assert.deepEqual(rows.map((r) => r.outcome), ['expired', null], JSON.stringify(rows));
        await complete(api(a, 'kw'), id, again.leaseId);
        assert.equal((await getJob(ca, id)).status, 'succeeded');
    });

    it('in a clean run no webhook event is delivered twice', { timeout: 60_000 }, async () => {
        const recv = await startReceiver();
        const config = webhookConfig({ extra: `  secretKey: "Oam97DkNfLEKB6ZLxiOrA4QO50sGBbWMFMjv+5ehpZk="\n${KEYS}` });
        const [a, b, c] = await cluster(config);
        const t = api(a, 'ka');
        const hook = await createEndpoint(t, `${recv.url}/hook`, ['job.queued', 'job.succeeded']);
        assert.ok(hook.id);
        const JOBS = 60;
        const clients = [a, b, c].map((d) => api(d, 'ka'));
        const workers = [a, b, c].map((d) => api(d, 'wa'));
        const jobIds = await mapLimit(Array.from({ length: JOBS }, (_, i) => i), 6, async (i) =>
            (await submit(clients[i % 3], { type: 'report.export', payload: { i } })).json.id);
        await mapLimit(jobIds, 6, async (id, i) => {
            const l = await leaseOne(workers[(i + 1) % 3], ['report.export'], { expectId: undefined });
            await complete(workers[(i + 1) % 3], l.job.id, l.leaseId);
        });
        await waitUntil(() => recv.requests.length, (n) => n >= 2 * JOBS, { timeoutMs: 20_000 * SLOW, intervalMs: 50, what: `${2 * JOBS} deliveries` });
        await sleep(1500); // a duplicate would come now: every node scans the outbox each second
        const evIds = recv.requests.map((r) => JSON.parse(r.body).id);
        const dup = evIds.filter((x, i) => evIds.indexOf(x) !== i);
        assert.deepEqual(dup, [], 'events delivered twice');
        assert.equal(recv.requests.length, 2 * JOBS);
        const perJob = new Map();
        for (const r of recv.requests) {
            const ev = JSON.parse(r.body);
            const key = `${ev.data.job} ${ev.type}`;
            perJob.set(key, (perJob.get(key) ?? 0) + 1);
        }
        assert.equal(perJob.size, 2 * JOBS, JSON.stringify([...perJob]));
        for (const d of [a, b, c]) await stopClean(d);
        await recv.close();
    });
});
