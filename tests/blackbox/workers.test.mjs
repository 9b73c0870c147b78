// The worker API: leases (shape, waiting, order, runAt, exclusivity), heartbeat, complete, fail,
// fencing with leaseId, lease expiry.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    TIMESTAMP, assertJobShape, assertProblem, complete, expectStatus, fail, getJob, heartbeat, hget, lease, leaseOne,
    show, sleep, submit, submitAndLease, waitUntil,
} from './lib/jobs.mjs';

/** Lease until a job comes (retry backoff and lease expiry take a while); returns the lease. */
async function leaseEventually(w, types, { expectId, timeoutMs = 30_000, leaseSeconds = 30 } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const res = await lease(w, types, { wait: 2, leaseSeconds });
        if (res.status === 200) {
            assert.equal(res.json.leases.length, 1, show(res));
            if (expectId !== undefined) assert.equal(res.json.leases[0].job.id, expectId);
            return res.json.leases[0];
        }
        assert.equal(res.status, 204, show(res));
        assert.ok(Date.now() < deadline, `no job became leasable within ${timeoutMs} ms`);
    }
}

describe('leasing', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('200 {leases: [{job, leaseId, leaseExpiresAt}]}; the job becomes running, attempt 1', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c, { type: 'report.export', payload: { k: 'v' } })).json.id;
        const t0 = Date.now();
        const res = expectStatus(await lease(w, 'report.export', { leaseSeconds: 30 }), 200);
        assert.ok(Array.isArray(res.json.leases) && res.json.leases.length === 1, res.text);
        const [l] = res.json.leases;
        assert.match(l.leaseId, /^lse_[A-Za-z0-9_-]+$/);
        assert.match(l.leaseExpiresAt, TIMESTAMP);
        const exp = Date.parse(l.leaseExpiresAt);
        assert.ok(exp >= t0 + 25_000 && exp <= Date.now() + 35_000, `leaseExpiresAt ${l.leaseExpiresAt} is not ~30 s ahead`);
        assertJobShape(l.job);
        assert.equal(l.job.id, id);
        assert.equal(l.job.status, 'running');
        assert.equal(l.job.attempt, 1);
        assert.deepEqual(l.job.payload, { k: 'v' });
        assert.match(l.job.startedAt ?? '', TIMESTAMP);
        const seen = await getJob(c, id);
        assert.equal(seen.status, 'running');
        assert.equal(seen.attempt, 1);
    });

    it('204 with no body when nothing arrives within wait', async () => {
        const { w } = tenant(d);
        const idle = await lease(w, 'report.export', { wait: 1 });
        assert.equal(idle.status, 204, idle.text);
        assert.equal(idle.text, '');
        assert.ok(idle.ms >= 800, `wait=1 answered after ${idle.ms.toFixed(0)} ms`);
        const now = await lease(w, 'report.export', { wait: 0 });
        assert.equal(now.status, 204);
        assert.ok(now.ms < 1000, `wait=0 held ${now.ms.toFixed(0)} ms`);
    });

    it('bad lease requests -> 422 validation-failed', async () => {
        const { w } = tenant(d);
        for (const body of [
            { max: 1, wait: 0 },
            { types: 'report.export', max: 1, wait: 0 },
            { types: ['report.export'], max: 0, wait: 0 },
            { types: ['report.export'], max: 101, wait: 0 },
            { types: ['report.export'], max: 1, wait: -1 },
            { types: ['report.export'], max: 1, wait: 0, leaseSeconds: 0 },
            { types: ['report.export'], max: 1, wait: 0, leaseSeconds: 3601 },
        ]) {
            const res = await w.post('/v1/leases', body);
            assertProblem(res, 422, 'validation-failed');
        }
    });

    it('only the requested types are leased', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        expectStatus(await lease(w, ['image.resize', 'email.send'], { wait: 0 }), 204);
        await leaseOne(w, ['image.resize', 'report.export'], { expectId: id, wait: 0 });
    });

    it('high before normal before low, FIFO within a priority', async () => {
        const { c, w } = tenant(d);
        const ids = {};
        for (const name of ['L1', 'N1', 'H1', 'N2', 'H2', 'L2']) {
            const priority = { L: 'low', N: 'normal', H: 'high' }[name[0]];
            ids[name] = (await submit(c, { type: 'report.export', payload: { name }, priority })).json.id;
        }
        const order = [];
        for (let i = 0; i < 6; i++) order.push((await leaseOne(w, 'report.export', { wait: 0 })).job.payload.name);
        assert.deepEqual(order, ['H1', 'H2', 'N1', 'N2', 'L1', 'L2']);
        expectStatus(await lease(w, 'report.export', { wait: 0 }), 204);
    });

    it('max: n leases up to n jobs, oldest first', async () => {
        const { c, w } = tenant(d);
        const sent = [];
        for (let i = 0; i < 3; i++) sent.push((await submit(c)).json.id);
        const res = expectStatus(await lease(w, 'report.export', { max: 2, wait: 0 }), 200);
        assert.deepEqual(res.json.leases.map((l) => l.job.id), sent.slice(0, 2));
        assert.notEqual(res.json.leases[0].leaseId, res.json.leases[1].leaseId);
        await leaseOne(w, 'report.export', { expectId: sent[2], wait: 0 });
    });

    it('concurrent leases never hand one job out twice', async () => {
        const { c, w } = tenant(d);
        const sent = await Promise.all(Array.from({ length: 5 }, () => submit(c)));
        const answers = await Promise.all(Array.from({ length: 12 }, () => lease(w, 'report.export', { wait: 0 })));
        const got = answers.filter((r) => r.status === 200).flatMap((r) => r.json.leases.map((l) => l.job.id));
        assert.ok(answers.every((r) => r.status === 200 || r.status === 204), answers.map((r) => r.status).join(','));
        assert.equal(got.length, 5, `leased ${got.length} times`);
        assert.deepEqual([...got].sort(), sent.map((r) => r.json.id).sort());
    });

    it('a job with runAt in the future is not leased before then', async () => {
        const { c, w } = tenant(d);
        const runAt = Date.now() + 3000;
        const later = (await submit(c, { type: 'report.export', payload: {}, runAt: new Date(runAt).toISOString() })).json.id;
        const past = (await submit(c, { type: 'report.export', payload: {}, runAt: new Date(Date.now() - 60_000).toISOString() })).json.id;
        await leaseOne(w, 'report.export', { expectId: past, wait: 0 });
        expectStatus(await lease(w, 'report.export', { wait: 0 }), 204);
        const l = await leaseEventually(w, 'report.export', { expectId: later, timeoutMs: 10_000 });
        assert.ok(Date.now() >= runAt - 100, `leased ${runAt - Date.now()} ms before runAt`);
        assert.equal(l.job.status, 'running');
    });

    /** A lease parks for 5 s, then a job is submitted: the lease must answer with that job. */
    async function parkThenSubmit(c, w) {
        const parked = lease(w, 'report.export', { wait: 5 });
        await sleep(300);
        const id = (await submit(c)).json.id;
        const res = await parked;
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.leases[0].job.id, id);
        return { res, id };
    }

    it('a parked lease gets a job submitted after it parked, at once', async () => {
        const { c, w } = tenant(d);
        const { res } = await parkThenSubmit(c, w);
        assert.ok(res.ms < 2500, `the parked lease answered after ${res.ms.toFixed(0)} ms of a 5 s wait`);
    });

    it('a worker that hung up while parked is passed over: the job goes to the next one', async () => {
        const { c, w, keys } = tenant(d);
        // The first in line: a raw HTTP/1.1 lease request whose connection closes while it waits.
        const body = JSON.stringify({ types: ['report.export'], wait: 5 });
        const sock = net.connect({ host: '127.0.0.1', port: Number(new URL(d.url).port) });
        await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
        sock.write(`POST /v1/leases HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.w}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        await sleep(300);
        sock.destroy();
        // Handed to the first, the job would sit leased to nobody: this one would get 204 after 5 s.
        const { id } = await parkThenSubmit(c, w);
        const attempts = expectStatus(await c.get(`/v1/jobs/${id}/attempts`), 200).json;
        assert.equal(attempts.attempts.length, 1, JSON.stringify(attempts));
    });
});

describe('reporting', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('heartbeat: progress and message reach pollers, lastUpdatedAt moves, the lease is extended', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const before = await getJob(c, id);
        await sleep(20);
        const hb = expectStatus(await heartbeat(w, id, l.leaseId, { progress: 40, message: 'encoding pass 1' }), 200);
        assert.equal(hb.json.cancelRequested, false);
        assert.equal(hb.json.job.progress, 40);
        assert.match(hb.json.leaseExpiresAt, TIMESTAMP);
        const seen = await getJob(c, id);
        assert.equal(seen.progress, 40);
        assert.equal(seen.message, 'encoding pass 1');
        assert.ok(Date.parse(seen.lastUpdatedAt) > Date.parse(before.lastUpdatedAt), `${seen.lastUpdatedAt} vs ${before.lastUpdatedAt}`);

        await sleep(20);
        const t0 = Date.now();
        const ext = expectStatus(await heartbeat(w, id, l.leaseId, { leaseSeconds: 600 }), 200);
        const exp = Date.parse(ext.json.leaseExpiresAt);
        assert.ok(exp >= t0 + 590_000 && exp <= Date.now() + 610_000, `leaseExpiresAt ${ext.json.leaseExpiresAt} not ~600 s ahead`);
        const again = await getJob(c, id);
        assert.equal(again.progress, 40, 'a heartbeat without progress keeps it');
        assert.ok(Date.parse(again.lastUpdatedAt) > Date.parse(seen.lastUpdatedAt), 'a bare heartbeat must move lastUpdatedAt');
    });

    it('a heartbeat without leaseSeconds still extends the lease, by the default 30 s', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 2 });
        const t0 = Date.now();
        const hb = expectStatus(await heartbeat(w, l.job.id, l.leaseId, { progress: 1 }), 200);
        const exp = Date.parse(hb.json.leaseExpiresAt);
        assert.ok(exp >= t0 + 29_000 && exp <= Date.now() + 31_000, `leaseExpiresAt ${hb.json.leaseExpiresAt} not ~30 s ahead`);
        await sleep(2500); // past the first lease: the job must still be ours
        expectStatus(await heartbeat(w, l.job.id, l.leaseId), 200);
    });

    it('heartbeat with progress out of 0-100 -> 422, nothing changes', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        expectStatus(await heartbeat(w, l.job.id, l.leaseId, { progress: 10 }), 200);
        const etag = hget(await c.get(`/v1/jobs/${l.job.id}`), 'etag');
        for (const progress of [101, -1, 'half']) {
            assertProblem(await heartbeat(w, l.job.id, l.leaseId, { progress }), 422, 'validation-failed');
        }
        assert.equal(hget(await c.get(`/v1/jobs/${l.job.id}`), 'etag'), etag);
    });

    it('complete: succeeded by default, partialSuccess on request, any other status -> 422', async () => {
        const { c, w } = tenant(d);
        const a = await submitAndLease(c, w);
        assertProblem(await w.post(`/v1/jobs/${a.job.id}:complete`, { leaseId: a.leaseId, status: 'failed' }), 422, 'validation-failed');
        assert.equal((await getJob(c, a.job.id)).status, 'running');
        const done = await complete(w, a.job.id, a.leaseId, { result: { n: 1 } });
        assert.equal(done.status, 'succeeded');
        assertJobShape(done);

        const b = await submitAndLease(c, w);
        const partial = await complete(w, b.job.id, b.leaseId, { status: 'partialSuccess', result: { ok: 9, failed: 1 } });
        assert.equal(partial.status, 'partialSuccess');
        const seen = await getJob(c, b.job.id);
        assert.equal(seen.status, 'partialSuccess');
        assert.deepEqual(seen.result, { ok: 9, failed: 1 });
        assert.match(seen.finishedAt ?? '', TIMESTAMP);
    });

    it('fail retryable requeues with attempt counting; the last attempt fails for good', async () => {
        const { c, w } = tenant(d);
        const l1 = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 2 });
        const id = l1.job.id;
        const q = await fail(w, id, l1.leaseId, { error: { title: 'Flaky', status: 503, code: 'flaky' }, retryable: true });
        assert.equal(q.status, 'queued');
        assert.equal(q.attempt, 1);
        assert.ok(!('error' in q), 'a requeued job carries no error');
        assertJobShape(q);

        const l2 = await leaseEventually(w, 'report.export', { expectId: id });
        assert.equal(l2.job.attempt, 2);
        assert.notEqual(l2.leaseId, l1.leaseId);
        const f = await fail(w, id, l2.leaseId, { error: { title: 'Flaky', status: 503, code: 'flaky' }, retryable: true });
        assert.equal(f.status, 'failed');
        assert.equal(f.attempt, 2);
        assert.equal(f.error.code, 'flaky');
        assert.equal((await getJob(c, id)).status, 'failed');
        expectStatus(await lease(w, 'report.export', { wait: 0 }), 204);
    });

    it('fail with retryable: false fails at once even with attempts left', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 5 });
        const f = await fail(w, l.job.id, l.leaseId, { error: { title: 'Bad input', status: 422, code: 'bad' }, retryable: false });
        assert.equal(f.status, 'failed');
        assert.equal(f.attempt, 1);
    });

    it('a leaseId that is not the live lease -> 409 stale-lease, and nothing changes', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const etag = hget(await c.get(`/v1/jobs/${id}`), 'etag');
        const bogus = 'lse_AAAAAAAAAAAAAAAAAAAAAA';
        assertProblem(await heartbeat(w, id, bogus, { progress: 99 }), 409, 'stale-lease');
        assertProblem(await w.post(`/v1/jobs/${id}:complete`, { leaseId: bogus, result: {} }), 409, 'stale-lease');
        assertProblem(await w.post(`/v1/jobs/${id}:fail`, { leaseId: bogus, error: { title: 'x' }, retryable: false }), 409, 'stale-lease');
        assertProblem(await w.post(`/v1/jobs/${id}:cancel`, { leaseId: bogus }), 409, 'stale-lease');
        const after = await c.get(`/v1/jobs/${id}`);
        assert.equal(hget(after, 'etag'), etag, 'a stale call changed the job');
        assert.equal(after.json.status, 'running');
        assert.notEqual(after.json.progress, 99);
    });

    it('an expired lease is requeued (attempt + 1) and its holder is fenced off', async () => {
        const { c, w } = tenant(d);
        const old = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 1 });
        const id = old.job.id;
        const now = await leaseEventually(w, 'report.export', { expectId: id, timeoutMs: 15_000 });
        assert.equal(now.job.attempt, 2);
        assert.notEqual(now.leaseId, old.leaseId);
        assertProblem(await heartbeat(w, id, old.leaseId, { progress: 5 }), 409, 'stale-lease');
        assertProblem(await w.post(`/v1/jobs/${id}:complete`, { leaseId: old.leaseId, result: { from: 'old' } }), 409, 'stale-lease');
        assert.equal((await getJob(c, id)).status, 'running');
        const done = await complete(w, id, now.leaseId, { result: { from: 'new' } });
        assert.deepEqual(done.result, { from: 'new' });
        assertProblem(await heartbeat(w, id, now.leaseId), 409, 'stale-lease');
    });

    it('an expired lease on the last attempt fails the job', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 1 }, { leaseSeconds: 1 });
        const res = await waitUntil(() => c.get(`/v1/jobs/${l.job.id}`), (r) => r.json?.status !== 'running', {
            timeoutMs: 10_000, what: 'the expired last attempt to end',
        });
        assert.equal(res.json.status, 'failed', res.text);
        assert.ok(res.json.error && typeof res.json.error === 'object', res.text);
        expectStatus(await lease(w, 'report.export', { wait: 0 }), 204);
    });

    it('timeoutSeconds bounds an attempt: heartbeats cannot keep the lease past it', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 1, timeoutSeconds: 1 }, { leaseSeconds: 30 });
        // The lease was granted for 30 s but the attempt may only run 1 s.
        assert.ok(Date.parse(l.leaseExpiresAt) - Date.parse(l.job.startedAt) <= 1000, JSON.stringify(l));
        const hb = expectStatus(await heartbeat(w, l.job.id, l.leaseId, { leaseSeconds: 60 }), 200);
        assert.ok(Date.parse(hb.json.leaseExpiresAt) - Date.parse(l.job.startedAt) <= 1000, hb.text);
        const res = await waitUntil(() => c.get(`/v1/jobs/${l.job.id}`), (r) => r.json?.status !== 'running', {
            timeoutMs: 10_000, what: 'the attempt to time out',
        });
        assert.equal(res.json.status, 'failed', res.text);
        assert.equal(res.json.error.code, 'lease-expired', res.text);
    });
});

describe('the next lease in a final report ("next")', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    const ask = { types: ['report.export'], max: 2, leaseSeconds: 60, worker: 'chained' };

    it(':complete with next answers {job, leases}: the job done, then queued jobs leased in priority order', async () => {
        const { c, w } = tenant(d);
        const first = await submitAndLease(c, w);
        const low = (await submit(c, { type: 'report.export', payload: { n: 'low' }, priority: 'low' })).json.id;
        const high = (await submit(c, { type: 'report.export', payload: { n: 'high' }, priority: 'high' })).json.id;
        const normal = (await submit(c, { type: 'report.export', payload: { n: 'normal' } })).json.id;
        const t0 = Date.now();
        const res = expectStatus(await w.post(`/v1/jobs/${first.job.id}:complete`, { leaseId: first.leaseId, result: { n: 1 }, next: ask }), 200);
        assert.equal(res.json.job.id, first.job.id);
        assert.equal(res.json.job.status, 'succeeded');
        assertJobShape(res.json.job);
        assert.deepEqual(res.json.leases.map((l) => l.job.id), [high, normal]);
        for (const l of res.json.leases) {
            assert.equal(l.job.status, 'running');
            assert.equal(l.job.attempt, 1);
            assert.match(l.leaseId, /^lse_[A-Za-z0-9_-]+$/);
            const exp = Date.parse(l.leaseExpiresAt);
            assert.ok(exp >= t0 + 55_000 && exp <= Date.now() + 65_000, `leaseExpiresAt ${l.leaseExpiresAt} is not ~60 s ahead`);
            const attempts = expectStatus(await c.get(`/v1/jobs/${l.job.id}/attempts`), 200).json.attempts;
            assert.deepEqual(attempts.map((a) => [a.worker, a.outcome]), [['chained', null]]);
        }
        assert.equal((await getJob(c, first.job.id)).status, 'succeeded');
        assert.equal((await getJob(c, low)).status, 'queued');
        // The leases are live: their holders can complete them.
        const [h] = res.json.leases;
        const last = expectStatus(await w.post(`/v1/jobs/${h.job.id}:complete`, { leaseId: h.leaseId, next: ask }), 200);
        assert.deepEqual(last.json.leases.map((l) => l.job.id), [low]);
        const none = expectStatus(await w.post(`/v1/jobs/${normal}:complete`, { leaseId: res.json.leases[1].leaseId, next: ask }), 200);
        assert.deepEqual(none.json.leases, [], 'nothing queued: an empty list, at once');
        assert.equal(none.json.job.status, 'succeeded');
    });

    it(':release with next hands the job back and takes it again under a new lease; :fail with next', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const again = expectStatus(await w.post(`/v1/jobs/${l.job.id}:release`, { leaseId: l.leaseId, next: ask }), 200);
        assert.equal(again.json.job.status, 'queued');
        assert.equal(again.json.leases.length, 1);
        const l2 = again.json.leases[0];
        assert.equal(l2.job.id, l.job.id);
        assert.notEqual(l2.leaseId, l.leaseId);
        assertProblem(await w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId }), 409, 'stale-lease');
        // A retryable failure is queued with a backoff, so the next lease does not take it back early.
        const f = expectStatus(await w.post(`/v1/jobs/${l.job.id}:fail`, { leaseId: l2.leaseId, error: { title: 'Flaky' }, next: ask }), 200);
        assert.equal(f.json.job.status, 'queued');
        assert.deepEqual(f.json.leases, []);
    });

    it('a report that is refused leases nothing', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const waiting = (await submit(c)).json.id;
        const bogus = 'lse_AAAAAAAAAAAAAAAAAAAAAA';
        assertProblem(await w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: bogus, next: ask }), 409, 'stale-lease');
        assertProblem(await w.post('/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA:complete', { leaseId: bogus, next: ask }), 404, 'not-found');
        assert.equal((await getJob(c, waiting)).status, 'queued');
        assert.equal((await getJob(c, l.job.id)).status, 'running');
        const attempts = expectStatus(await c.get(`/v1/jobs/${waiting}/attempts`), 200).json.attempts;
        assert.deepEqual(attempts, []);
    });

    it('next leases only the worker\'s own tenant and the types it names', async () => {
        const mine = tenant(d);
        const other = tenant(d);
        const l = await submitAndLease(mine.c, mine.w);
        const theirs = (await submit(other.c)).json.id;
        const email = (await submit(mine.c, { type: 'email.send', payload: {} })).json.id;
        const res = expectStatus(await mine.w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, next: ask }), 200);
        assert.deepEqual(res.json.leases, []);
        assert.equal((await getJob(other.c, theirs)).status, 'queued');
        assert.equal((await getJob(mine.c, email)).status, 'queued');
    });

    it('a bad next -> 422 with its pointer, and nothing changes', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const waiting = (await submit(c)).json.id;
        const etag = hget(await c.get(`/v1/jobs/${l.job.id}`), 'etag');
        const cases = [
            [':complete', { next: { types: [] } }, '/next/types'],
            [':complete', { next: { types: ['report.export'], max: 0 } }, '/next/max'],
            [':complete', { next: { types: ['report.export'], leaseSeconds: 3601 } }, '/next/leaseSeconds'],
            [':complete', { next: { types: ['report.export'], worker: 7 } }, '/next/worker'],
            [':complete', { next: { types: ['report.export'], wait: 5 } }, '/next/wait'],
            [':fail', { next: ['report.export'] }, '/next'],
            [':heartbeat', { next: ask }, '/next'],
        ];
        for (const [verb, extra, pointer] of cases) {
            const res = await w.post(`/v1/jobs/${l.job.id}${verb}`, { leaseId: l.leaseId, ...extra });
            assertProblem(res, 422, 'validation-failed');
            assert.ok(res.json.errors.some((e) => e.pointer === pointer), `${verb} ${JSON.stringify(extra)}: ${show(res)}`);
        }
        assert.equal(hget(await c.get(`/v1/jobs/${l.job.id}`), 'etag'), etag);
        assert.equal((await getJob(c, waiting)).status, 'queued');
    });
});

/**
 * Run fn(tenant) on a daemon of its own, stop it, and return how many writer operations it made beyond
 * `own`: each change is one writer operation, and the daemon logs their count when it stops. Besides the
 * jobs' own, the schedules engine looks for due schedules once at the start (counted here), and the webhook
 * thread sweeps old deliveries a second after the start (then once a minute). Always the SQLite store: on
 * PostgreSQL the schedules engine also looks once a second, for schedules another node made.
 */
async function writerOpsBeyond(own, fn) {
    const d = await startDaemon({ config: standardConfig({ sweepInterval: '1h' }), store: null });
    try {
        await fn(tenant(d));
        assert.deepEqual(await d.stop(), { code: 0, signal: null }, d.stderr.slice(-4000));
        const ops = d.stderr.match(/writer: (\d+) operations in/);
        assert.ok(ops !== null, `no writer summary in the log:\n${d.stderr.slice(-4000)}`);
        return Number(ops[1]) - own - 1;
    } finally {
        await d.stop();
    }
}

describe("a lease's expiry check", () => {
    it('goes with a lease that ends before its expiry: the writer does nothing more then', async () => {
        // A finished lease whose check stayed armed made the writer read the job again at its expiry.
        const n = 10;
        const extra = await writerOpsBeyond(2 * n * 3, async ({ c, w }) => {
            for (let i = 0; i < n; i++) {
                const done = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 1 });
                await complete(w, done.job.id, done.leaseId);
                const failed = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 1 }, { leaseSeconds: 1 });
                await fail(w, failed.job.id, failed.leaseId, { retryable: false });
            }
            await sleep(2500); // past every lease's expiry
        });
        assert.ok(extra >= 0 && extra <= 1, `${extra} operations beyond a submit, a lease and a report per job`);
    });

    it('moves with a heartbeat that extends the lease: nothing checks a lease that is still live', async () => {
        const beats = 6;
        const extra = await writerOpsBeyond(3 + beats, async ({ c, w }) => {
            const l = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 1 });
            for (let i = 0; i < beats; i++) {
                await sleep(400); // the lease is 1 s, then 2 s from each heartbeat: the first expiry passes
                expectStatus(await heartbeat(w, l.job.id, l.leaseId, { leaseSeconds: 2 }), 200);
            }
            await complete(w, l.job.id, l.leaseId);
        });
        assert.ok(extra >= 0 && extra <= 1, `${extra} operations beyond the submit, lease, ${beats} heartbeats and complete`);
    });

    it('moves with a heartbeat that shortens the lease: the job is requeued soon after the new expiry', async () => {
        const d = await startDaemon({ config: standardConfig() });
        try {
            const { c, w } = tenant(d);
            const l = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 600 });
            const hb = expectStatus(await heartbeat(w, l.job.id, l.leaseId, { leaseSeconds: 1 }), 200);
            assert.ok(Date.parse(hb.json.leaseExpiresAt) <= Date.now() + 1500, hb.text);
            // Checked at the lease's first expiry, 600 s on, the job would wait that long for its next worker.
            const job = await waitUntil(() => getJob(c, l.job.id), (j) => j.status === 'queued', { timeoutMs: 15_000, what: 'the requeue' });
            assert.equal(job.attempt, 1);
            assertProblem(await heartbeat(w, l.job.id, l.leaseId), 409, 'stale-lease');
        } finally {
            await d.stop();
        }
    });
});

/** The gauges of GET /metrics (admin key), as {name: number}. */
async function metrics(a) {
    const res = expectStatus(await a.req('GET', '/metrics'), 200);
    assert.match(hget(res, 'content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return Object.fromEntries(res.text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => {
        const [name, value] = l.split(' ');
        return [name, Number(value)];
    }));
}

/**
 * Park one lease per id (each takes one job) and check that every one gets a job, not before its runAt, and that
 * together they got exactly ids. runAts: id -> ms.
 */
async function parkedLeasesGet(w, runAts) {
    const answers = await Promise.all(Object.keys(runAts).map(async () => {
        const res = await lease(w, 'report.export', { wait: 5 });
        return { res, at: Date.now() };
    }));
    const got = [];
    for (const { res, at } of answers) {
        assert.equal(res.status, 200, `a parked lease was not woken by a due job: ${show(res)}`);
        const { id } = res.json.leases[0].job;
        assert.ok(at >= runAts[id] - 100, `${id} leased ${runAts[id] - at} ms before its runAt`);
        got.push(id);
    }
    assert.deepEqual(got.sort(), Object.keys(runAts).sort());
}

describe('scheduled jobs past the runAt timers (limits.scheduledTimers)', () => {
    const limits = '{ maxBodyBytes: 4096, maxWaitSeconds: 5, scheduledTimers: 3 }';

    it('wait in the store and still wake parked workers when due, in any submit order', async () => {
        const d = await startDaemon({ config: standardConfig({ limits }) });
        try {
            const { c, w, a } = tenant(d);
            const t0 = Date.now() + 1000;
            // Latest first, then earlier ones (each lowers the horizon), two sharing one runAt.
            const offsets = [1100, 1000, 900, 200, 800, 100, 700, 0, 600, 300, 300, 500];
            const runAts = {};
            for (const ms of offsets) {
                const at = t0 + ms;
                runAts[(await submit(c, { type: 'report.export', payload: {}, runAt: new Date(at).toISOString() })).json.id] = at;
            }
            const m = await metrics(a);
            assertProblem(await c.req('GET', '/metrics'), 403, 'forbidden'); // operators' figures: admin keys only
            assert.equal(m.acceptd_scheduled_timers_limit, 3);
            assert.ok(m.acceptd_scheduled_timers >= 1 && m.acceptd_scheduled_timers <= 3,
                `${m.acceptd_scheduled_timers} runAt timers in memory, limit 3`);
            await parkedLeasesGet(w, runAts);
            assert.equal((await metrics(a)).acceptd_scheduled_timers, 0);
        } finally {
            await d.stop();
        }
    });

    it('are read from the store after a restart, a page at a time', async () => {
        const d = await startDaemon({ config: standardConfig({ limits }) });
        try {
            const { c, w, a } = tenant(d);
            const t0 = Date.now() + 3000;
            const runAts = {};
            for (let i = 0; i < 8; i++) {
                const at = t0 + 100 * i;
                runAts[(await submit(c, { type: 'report.export', payload: {}, runAt: new Date(at).toISOString() })).json.id] = at;
            }
            await d.restart();
            assert.match(d.stderr, /recovered 0 running leases and 3 scheduled jobs \(more are read as they come due\)/);
            assert.equal((await metrics(a)).acceptd_scheduled_timers, 3);
            await parkedLeasesGet(w, runAts);
        } finally {
            await d.stop();
        }
    });
});
