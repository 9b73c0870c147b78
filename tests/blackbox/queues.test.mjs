// Queues (CONTRACT.md section 11): GET /v1/queues, GET/PATCH /v1/queues/{type}; pause, concurrency and rate
// limits enforced in the lease path, parked lease requests woken the moment a slot opens, counts and waitingFor,
// settings from the configuration and surviving kill -9.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, lease, show, sleep, submit } from './lib/jobs.mjs';
import { getQueue, patchQueue } from './lib/queues.mjs';

describe('queues', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: standardConfig({
                types: `
  video.transcode: {}
  report.export: {}
  email.send: {}
  limited.conf: { concurrency: 2, rateLimit: { limit: 5, period: 1m } }`,
            }),
        });
    });
    after(() => d?.stop());

    it('a queue shows its settings and counts; PATCH merges, null clears, the answer is the queue', async () => {
        const { c, a } = tenant(d);
        const q0 = await getQueue(c, 'report.export');
        assert.deepEqual(q0, {
            type: 'report.export', paused: false, concurrency: null, groupConcurrency: null, rateLimit: null,
            groupRateLimit: null, counts: { queued: 0, running: 0, scheduled: 0, waiting: 0 }, waitingFor: null,
        });
        await submit(c, { type: 'report.export', payload: {} });
        await submit(c, { type: 'report.export', payload: {}, runAt: new Date(Date.now() + 3600_000).toISOString() });
        let res = expectStatus(await patchQueue(a, 'report.export', { concurrency: 3, rateLimit: { limit: 10, period: '1s' } }), 200);
        assert.equal(res.json.concurrency, 3);
        assert.deepEqual(res.json.rateLimit, { limit: 10, period: '1s' });
        assert.deepEqual(res.json.counts, { queued: 1, running: 0, scheduled: 1, waiting: 0 });
        // Nested objects merge; members left out stay.
        res = expectStatus(await patchQueue(a, 'report.export', { rateLimit: { period: '1m' }, groupConcurrency: 2 }), 200);
        assert.deepEqual(res.json.rateLimit, { limit: 10, period: '1m' });
        assert.equal(res.json.concurrency, 3);
        assert.equal(res.json.groupConcurrency, 2);
        res = expectStatus(await patchQueue(a, 'report.export', { groupRateLimit: { limit: 4, period: '10s' } }), 200);
        assert.deepEqual(res.json.groupRateLimit, { limit: 4, period: '10s' });
        // null clears.
        res = expectStatus(await patchQueue(a, 'report.export', { concurrency: null, rateLimit: null }), 200);
        assert.equal(res.json.concurrency, null);
        assert.equal(res.json.rateLimit, null);
        assert.equal(res.json.groupConcurrency, 2);
        assert.deepEqual(await getQueue(c, 'report.export'), res.json);
        // The list holds every type with jobs or settings.
        await patchQueue(a, 'email.send', { paused: true });
        const list = expectStatus(await c.get('/v1/queues'), 200).json.queues;
        assert.deepEqual(list.map((q) => q.type), ['email.send', 'report.export']);
        assert.equal(list[0].paused, true);
    });

    it('422 with a JSON Pointer to an invalid or unknown member, and nothing of the patch applies', async () => {
        const { a } = tenant(d);
        const cases = [
            [{ concurrency: 0 }, '/concurrency'],
            [{ concurrency: 'x' }, '/concurrency'],
            [{ paused: 1 }, '/paused'],
            [{ bogus: true }, '/bogus'],
            [{ rateLimit: { limit: 5 } }, '/rateLimit/period'],
            [{ rateLimit: { limit: 5, period: 'soon' } }, '/rateLimit/period'],
            [{ rateLimit: { limit: 5, period: '1s', burst: 2 } }, '/rateLimit/burst'],
            [{ groupRateLimit: 7 }, '/groupRateLimit'],
            [{ paused: true, groupConcurrency: -1 }, '/groupConcurrency'],
        ];
        for (const [body, pointer] of cases) {
            const res = await patchQueue(a, 'report.export', body);
            assertProblem(res, 422, 'validation-failed');
            assert.ok(res.json.errors.some((e) => e.pointer === pointer), `${JSON.stringify(body)}: ${show(res)}`);
        }
        // The valid member of the last patch did not apply.
        assert.equal((await getQueue(a, 'report.export')).paused, false);
        assertProblem(await patchQueue(a, 'report.export', { paused: true }, { 'content-type': 'application/json' }), 415, 'unsupported-media-type');
    });

    it('a type the configuration does not list has no queue: 404', async () => {
        const { c, a } = tenant(d);
        assertProblem(await c.get('/v1/queues/no.such'), 404, 'not-found');
        assertProblem(await patchQueue(a, 'no.such', { paused: true }), 404, 'not-found');
        assertProblem(await a.req('DELETE', '/v1/queues/report.export'), 405, 'method-not-allowed');
    });

    it('PATCH is for the admin role only; GET for any', async () => {
        const { c, w, a } = tenant(d);
        assertProblem(await patchQueue(c, 'report.export', { paused: true }), 403, 'forbidden');
        assertProblem(await patchQueue(w, 'report.export', { paused: true }), 403, 'forbidden');
        expectStatus(await w.get('/v1/queues/report.export'), 200);
        expectStatus(await patchQueue(a, 'report.export', { paused: true }), 200);
    });

    it('paused: nothing is leased, submits are accepted, waitingFor says paused; a parked lease gets the job on unpause', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { paused: true }), 200);
        const id = (await submit(c, { type: 'report.export', payload: {} })).json.id;
        assert.equal((await lease(w, 'report.export', { wait: 1 })).status, 204);
        const q = await getQueue(c, 'report.export');
        assert.deepEqual(q.counts, { queued: 1, running: 0, scheduled: 0, waiting: 1 });
        assert.equal(q.waitingFor, 'paused');
        // The job says why it waits, under an ETag of its own.
        const held = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        assert.equal(held.json.status, 'queued');
        assert.equal(held.json.waitingFor, 'paused', show(held));
        // A parked lease request (wait 5 s) gets the job once the queue is resumed.
        const parked = lease(w, 'report.export', { wait: 5 });
        await sleep(300);
        expectStatus(await patchQueue(a, 'report.export', { paused: false }), 200);
        const res = expectStatus(await parked, 200);
        assert.equal(res.json.leases[0].job.id, id);
        assert.ok(res.ms < 4500, `the parked lease took ${res.ms} ms: it was not woken by the resume`);
        assert.equal(res.json.leases[0].job.waitingFor, undefined);
    });

    it('a queued job whose queue is not held back has no waitingFor, and a held one changes its ETag', async () => {
        const { c, a } = tenant(d);
        const id = (await submit(c, { type: 'report.export', payload: {} })).json.id;
        const free = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        assert.equal(free.json.waitingFor, undefined);
        expectStatus(await patchQueue(a, 'report.export', { paused: true }), 200);
        const held = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': free.headers.get('etag') } });
        assert.equal(held.status, 200, `a 304 to the ETag of the job before its queue was paused: ${show(held)}`);
        assert.equal(held.json.waitingFor, 'paused');
        assert.notEqual(held.headers.get('etag'), free.headers.get('etag'));
        assert.equal((await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': held.headers.get('etag') } })).status, 304);
    });

    it('a submit is not handed to a parked worker of a paused queue', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { paused: true }), 200);
        const parked = lease(w, 'report.export', { wait: 2 });
        await sleep(300);
        const id = (await submit(c, { type: 'report.export', payload: {} })).json.id;
        assert.equal((await parked).status, 204);
        assert.equal(expectStatus(await c.get(`/v1/jobs/${id}`), 200).json.status, 'queued');
    });

    it('concurrency n: n leased of n + 1, the next only once one ends, and a parked lease gets it', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { concurrency: 2 }), 200);
        for (let i = 0; i < 3; i++) await submit(c, { type: 'report.export', payload: { i } });
        const first = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.equal(first.length, 2, 'a lease took more than the concurrency');
        assert.equal((await lease(w, 'report.export', { wait: 1 })).status, 204);
        const q = await getQueue(c, 'report.export');
        assert.deepEqual(q.counts, { queued: 1, running: 2, scheduled: 0, waiting: 1 });
        assert.equal(q.waitingFor, 'concurrency');
        const waiting = expectStatus(await c.get(`/v1/jobs?status=queued`), 200).json;
        const third = (waiting.jobs ?? waiting.items ?? []).find((j) => j.type === 'report.export');
        if (third) assert.equal(expectStatus(await c.get(`/v1/jobs/${third.id}`), 200).json.waitingFor, 'concurrency');
        const parked = lease(w, 'report.export', { wait: 5 });
        await sleep(300);
        await complete(w, first[0].job.id, first[0].leaseId);
        const res = expectStatus(await parked, 200);
        assert.equal(res.json.leases.length, 1);
        assert.ok(res.ms < 4500, `the parked lease took ${res.ms} ms: it was not woken by the freed slot`);
        assert.equal((await getQueue(c, 'report.export')).counts.running, 2);
    });

    it('rateLimit n per period: a lease never holds more than n, a window no more than n, the next window opens by itself', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { rateLimit: { limit: 3, period: '2s' } }), 200);
        for (let i = 0; i < 7; i++) await submit(c, { type: 'report.export', payload: { i } });
        const starts = [];
        const t0 = Date.now();
        // One worker asking for 10 at a time with a long wait: each answer is at most 3, and the parked
        // request is answered when a window opens (the window's timer), not when its wait ends.
        while (starts.length < 7 && Date.now() - t0 < 15_000) {
            const res = await lease(w, 'report.export', { max: 10, wait: 5 });
            if (res.status === 204) continue;
            const got = expectStatus(res, 200).json.leases;
            assert.ok(got.length <= 3, `one lease answer held ${got.length} jobs`);
            for (const l of got) starts.push(Date.parse(l.job.startedAt));
        }
        assert.equal(starts.length, 7, 'not every job was leased');
        starts.sort((x, y) => x - y);
        // No span of one period (2 s) holds more than twice the limit; a fixed window of 2 s holds at most 3.
        for (let i = 0; i < starts.length; i++) {
            const inSpan = starts.filter((s) => s >= starts[i] && s < starts[i] + 2000).length;
            assert.ok(inSpan <= 6, `${inSpan} leases within 2 s`);
            const win = Math.floor(starts[i] / 2000);
            assert.ok(starts.filter((s) => Math.floor(s / 2000) === win).length <= 3, 'a window started more than 3');
        }
        // 7 jobs at 3 a window take at least three windows, and no more than about that: a request parked on
        // the limit is answered when the next window opens, not when its 5 s wait runs out (that would take 10 s).
        assert.ok(starts[6] - starts[0] >= 2000, `7 leases within ${starts[6] - starts[0]} ms`);
        assert.ok(Date.now() - t0 < 9000, `7 leases took ${Date.now() - t0} ms: the opening windows did not wake the parked request`);
    });

    it('the configuration gives the initial settings', async () => {
        const { c } = tenant(d);
        const q = await getQueue(c, 'limited.conf');
        assert.equal(q.concurrency, 2);
        assert.deepEqual(q.rateLimit, { limit: 5, period: '1m' });
    });
});

describe('/metrics counts the waiting jobs by reason', () => {
    it('acceptd_jobs_waiting{reason="paused"}', async () => {
        const d = await startDaemon({ config: standardConfig() });
        try {
            const { c, a } = tenant(d);
            expectStatus(await patchQueue(a, 'report.export', { paused: true }), 200);
            for (let i = 0; i < 2; i++) await submit(c, { type: 'report.export', payload: { i } });
            const res = expectStatus(await a.get('/metrics'), 200);
            assert.match(res.text, /^acceptd_jobs_waiting\{reason="paused"\} 2$/m, res.text);
            assert.match(res.text, /^acceptd_jobs_waiting\{reason="concurrency"\} 0$/m);
        } finally {
            await d.stop();
        }
    });
});

describe('queue settings are durable', () => {
    it('survive kill -9 and a restart', async () => {
        const d = await startDaemon({ config: standardConfig() });
        try {
            const { c, w, a } = tenant(d);
            expectStatus(await patchQueue(a, 'report.export', { paused: true, concurrency: 4, rateLimit: { limit: 9, period: '10s' } }), 200);
            await d.kill9();
            await d.restart();
            const q = await getQueue(c, 'report.export');
            assert.equal(q.paused, true);
            assert.equal(q.concurrency, 4);
            assert.deepEqual(q.rateLimit, { limit: 9, period: '10s' });
            await submit(c, { type: 'report.export', payload: {} });
            assert.equal((await lease(w, 'report.export', { wait: 1 })).status, 204, 'a paused queue leased after the restart');
        } finally {
            await d.stop();
        }
    });

    it('bad settings in the configuration refuse to start', async () => {
        await assert.rejects(startDaemon({ config: standardConfig({ types: '\n  video.transcode: {}\n  report.export: { concurrency: 0 }' }) }), /types\.report\.export\.concurrency: expected an integer from 1/);
        await assert.rejects(startDaemon({ config: standardConfig({ types: '\n  video.transcode: {}\n  report.export: { rateLimit: { limit: 3 } }' }) }), /types\.report\.export\.rateLimit: a rate limit needs both/);
    });
});
