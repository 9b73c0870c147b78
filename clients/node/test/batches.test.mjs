// Batches and schedules against the real daemon (docs/protocol.md; CONTRACT §12, §13): a batch submitted,
// followed over its event stream (resumed with Last-Event-ID after a cut) and, behind a proxy that refuses
// event streams, by polling with If-None-Match at the Retry-After pace; its jobs paged; a batch cancelled; a
// refused batch's typed problem; and a schedule created, read, listed, patched, triggered and deleted.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker, ProblemError } from '../src/index.mjs';
import { startDaemon, tenant, startProxy } from './helpers.mjs';

describe('batches and schedules', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(async () => {
        await d?.stop();
    });

    // A worker that completes each job once the test lets it (gate), so that the batch is seen running.
    function worker(t, type, gate) {
        const w = new Worker(d.url, t.keys.w, {
            types: [type],
            concurrency: 2,
            waitSeconds: 2,
            onError: (e) => assert.fail(`worker error: ${e.stack}`),
            handler: async (job) => {
                await gate;
                return { n: job.payload.n };
            },
        });
        w.start();
        return w;
    }

    it('follows a batch over its event stream, resuming it after a cut, and pages its jobs', { timeout: 120_000 }, async () => {
        const t = tenant(d);
        let cuts = 0;
        const proxy = await startProxy(d.url, (req) => (req.url.endsWith('/events') && cuts++ === 0 ? 'cut' : null));
        const client = new Client(proxy.url, t.keys.c);
        const batch = await client.submitBatch([1, 2, 3].map((n) => ({ type: 'image.resize', payload: { n } })));
        assert.match(batch.id, /^bat_/);
        assert.equal(batch.status, 'running');
        assert.equal(batch.data.total, 3);
        let open;
        const w = worker(t, 'image.resize', new Promise((r) => (open = r)));
        const seen = [];
        let final;
        try {
            const waiting = batch.wait({ timeout: 60_000, onProgress: (b, meta) => seen.push([meta.event, b.counts.succeeded]) });
            setTimeout(open, 300);
            final = await waiting;
        } finally {
            await w.stop({ abort: true });
            await proxy.close();
        }
        assert.equal(batch.followedBy, 'sse');
        assert.equal(final.status, 'succeeded');
        assert.deepEqual(final.counts, { queued: 0, running: 0, succeeded: 3, partialSuccess: 0, failed: 0, cancelled: 0 });
        assert.equal(final.progress, 100);
        assert.ok(seen.length >= 1 && seen.every(([e]) => e === 'batch'), JSON.stringify(seen));
        const streams = proxy.log.filter((r) => r.url.endsWith('/events'));
        assert.ok(streams.length >= 2, 'the cut stream was opened again');
        assert.equal(streams[0].headers['last-event-id'], undefined);
        assert.match(streams[1].headers['last-event-id'] ?? '', /^\d+$/, 'resumed from the last event');

        const ids = [];
        for await (const j of new Client(d.url, t.keys.c).batch(batch.id).jobs({ limit: 2 })) ids.push([j.payload.n, j.batchId, j.status]);
        assert.deepEqual(ids.sort(), [1, 2, 3].map((n) => [n, batch.id, 'succeeded']));
    });

    it('polls a batch at the Retry-After pace with If-None-Match when event streams are refused', { timeout: 120_000 }, async () => {
        const t = tenant(d);
        const proxy = await startProxy(d.url, (req) => (req.url.endsWith('/events') ? { status: 502, headers: { 'content-type': 'text/plain' }, body: 'no streams here' } : null));
        const client = new Client(proxy.url, t.keys.c);
        const batch = await client.submitBatch([{ type: 'report.export', payload: { n: 1 } }]);
        let open;
        const w = worker(t, 'report.export', new Promise((r) => (open = r)));
        let final;
        try {
            const waiting = batch.wait({ timeout: 60_000 });
            setTimeout(open, 2500);
            final = await waiting;
        } finally {
            await w.stop({ abort: true });
            await proxy.close();
        }
        assert.equal(batch.followedBy, 'poll');
        assert.equal(final.status, 'succeeded');
        const polls = proxy.log.filter((r) => r.method === 'GET' && r.url === `/v1/batches/${batch.id}`);
        assert.ok(polls.length >= 2, `${polls.length} polls`);
        assert.equal(polls[0].headers['if-none-match'], undefined);
        assert.ok(polls.slice(1).every((r) => r.headers['if-none-match']), 'each later poll sends the ETag');
        // The daemon's Retry-After for a running batch is at least a second: no two polls closer than that.
        for (let i = 1; i < polls.length; i++) assert.ok(polls[i].at - polls[i - 1].at >= 950, `poll ${i} came ${polls[i].at - polls[i - 1].at} ms after the one before`);
    });

    it('cancels a batch, and refuses a bad one with a typed problem', { timeout: 60_000 }, async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const batch = await client.submitBatch([{ type: 'email.send', payload: {} }, { type: 'email.send', payload: {} }]);
        const after = await batch.cancel();
        assert.equal(after.status, 'cancelled');
        assert.equal(after.counts.cancelled, 2);
        assert.equal((await batch.wait({ timeout: 10_000 })).status, 'cancelled');
        const e = await client.submitBatch([{ type: 'email.send', payload: {} }, { type: 'no.such.type', payload: {} }]).then(
            () => assert.fail('accepted'),
            (x) => x,
        );
        assert.ok(e instanceof ProblemError, String(e));
        assert.equal(e.status, 422);
        assert.ok(e.errors.some((x) => x.pointer.startsWith('/jobs/1')), JSON.stringify(e.errors));
        // The callbackUrl goes with the batch: this daemon's SSRF guard refuses a loopback one, at its pointer.
        const cb = await client.submitBatch([{ type: 'email.send', payload: {} }], { callbackUrl: 'http://127.0.0.1:9/hook' }).catch((x) => x);
        assert.ok(cb instanceof ProblemError && cb.status === 422, String(cb));
        assert.deepEqual(cb.errors.map((x) => x.pointer), ['/callbackUrl']);
    });

    it('creates, reads, lists, patches, triggers and deletes a schedule', { timeout: 60_000 }, async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const s = await client.schedules.create({ id: 'nightly-export', cron: '0 3 * * *', timezone: 'Europe/Berlin', job: { type: 'report.export', payload: { month: 'last' } } });
        assert.equal(s.id, 'nightly-export');
        assert.equal(s.upcoming.length, 5);
        assert.equal((await client.schedules.get('nightly-export')).cron, '0 3 * * *');
        await client.schedules.create({ id: 'often', every: '1h', job: { type: 'email.send', payload: {} } });
        const listed = [];
        for await (const x of client.schedules.list({ limit: 1 })) listed.push(x.id);
        assert.deepEqual(listed.sort(), ['nightly-export', 'often']);
        const paused = await client.schedules.update('nightly-export', { paused: true, timezone: null });
        assert.equal(paused.paused, true);
        assert.equal(paused.timezone, 'UTC', 'null sends a member back to its default');
        const run = await client.schedules.trigger('often');
        assert.equal(run.recentRuns.length, 1);
        const job = await client.get(run.recentRuns[0].jobId);
        assert.equal(job.schedule.id, 'often');
        await client.schedules.delete('often');
        const e = await client.schedules.get('often').catch((x) => x);
        assert.ok(e instanceof ProblemError && e.status === 404, String(e));
        const dup = await client.schedules.create({ id: 'nightly-export', every: '5m', job: { type: 'email.send', payload: {} } }).catch((x) => x);
        assert.ok(dup instanceof ProblemError && dup.status === 409, String(dup));
    });
});
