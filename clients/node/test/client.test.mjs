// Client against the real daemon: submit (with an Idempotency-Key made by default) and wait over SSE with
// progress; wait when a proxy refuses the event stream: it polls GET /v1/jobs/{id} at the Retry-After pace with
// If-None-Match; list pages, cancel, retry, result; problems typed as ProblemError.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker, ProblemError } from '../src/index.mjs';
import { startDaemon, tenant, startProxy } from './helpers.mjs';

describe('Client', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(async () => {
        await d?.stop();
    });

    it('submits with an Idempotency-Key by default and waits over SSE, seeing the progress', async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const job = await client.submit('report.export', { month: '2026-11' });
        assert.match(job.id, /^job_/);
        assert.equal(job.status, 'queued');
        assert.ok(job.idempotencyKey, 'an idempotency key was made');
        // The same submit again with the key answers the same job: the key was sent.
        const again = await client.submit('report.export', { month: '2026-11' }, { idempotencyKey: job.idempotencyKey });
        assert.equal(again.id, job.id);
        assert.equal(again.replayed, true);

        const w = new Worker(d.url, t.keys.w, {
            types: ['report.export'],
            waitSeconds: 2,
            handler: async (lease, ctx) => {
                await ctx.progress(40, 'halfway');
                return { rows: 7, month: lease.payload.month };
            },
        });
        w.start();
        const seen = [];
        const final = await job.wait({ timeout: 30_000, onProgress: (e) => seen.push(e) });
        await w.stop();
        assert.equal(job.followedBy, 'sse');
        assert.equal(final.status, 'succeeded');
        assert.deepEqual(final.result, { rows: 7, month: '2026-11' });
        assert.ok(seen.some((e) => e.status === 'running'), JSON.stringify(seen));
        assert.ok(seen.some((e) => e.progress === 40 && e.message === 'halfway'), JSON.stringify(seen));
        assert.deepEqual(await job.result(), { rows: 7, month: '2026-11' });
    });

    it('sends a submit whose answer was lost again, with its key: one job', async () => {
        const t = tenant(d);
        let submits = 0;
        const proxy = await startProxy(d.url, (req) => (req.method === 'POST' && req.url === '/v1/jobs' && ++submits === 1 ? 'lose' : null));
        const client = new Client(proxy.url, t.keys.c);
        const job = await client.submit('email.send', { to: 'once' });
        await proxy.close();
        assert.equal(submits, 2, 'sent twice');
        assert.equal(job.replayed, true, 'the second answer is the first job, replayed');
        const all = [];
        for await (const j of new Client(d.url, t.keys.c).list({ type: 'email.send' })) all.push(j.id);
        assert.deepEqual(all, [job.id]);
    });

    it('resumes a broken event stream with Last-Event-ID, missing no event and seeing none twice', async () => {
        const t = tenant(d);
        let streams = 0;
        const proxy = await startProxy(d.url, (req) => (/\/events(\?|$)/.test(req.url) && ++streams === 1 ? 'cut' : null));
        const client = new Client(proxy.url, t.keys.c);
        const job = await client.submit('report.export', {});
        const seen = [];
        const waiting = job.wait({ timeout: 60_000, onProgress: (e) => seen.push(e.status) });
        const w = new Worker(d.url, t.keys.w, { types: ['report.export'], waitSeconds: 2, handler: async () => 'ok' });
        // The first stream is cut after its first event (queued); the job then runs while no stream is open.
        while (streams < 2) await new Promise((r) => setTimeout(r, 20));
        w.start();
        const final = await waiting;
        await w.stop();
        await proxy.close();
        assert.equal(final.status, 'succeeded');
        assert.equal(job.followedBy, 'sse');
        const opens = proxy.log.filter((r) => /\/events(\?|$)/.test(r.url));
        assert.ok(opens.length >= 2, `streams opened: ${opens.length}`);
        assert.equal(opens[0].headers['last-event-id'], undefined);
        assert.match(opens[1].headers['last-event-id'] ?? '', /^\d+$/, 'the second stream resumes from the first one\'s last id');
        assert.deepEqual(seen, ['queued', 'running'], 'each event once, in order');
    });

    it('polls at the Retry-After pace, with If-None-Match, when a proxy refuses the event stream', async () => {
        const t = tenant(d);
        const refused = [];
        const proxy = await startProxy(d.url, (req) => {
            if (/\/events(\?|$)/.test(req.url)) {
                refused.push(req.url);
                return { status: 503, headers: { 'content-type': 'text/plain' }, body: 'no streams here' };
            }
            return null;
        });
        const inm = [];
        const origFetch = globalThis.fetch;
        const client = new Client(proxy.url, t.keys.c, {
            fetch: (u, init) => {
                if (init.method === 'GET' && /\/v1\/jobs\/job_[^/]*$/.test(String(u))) inm.push(init.headers['if-none-match'] ?? null);
                return origFetch(u, init);
            },
        });
        const job = await client.submit('report.export', {});
        const waiting = job.wait({ timeout: 60_000 });
        // Leave it queued for a while, so that there are several polls to time, then run it.
        await new Promise((r) => setTimeout(r, 4500));
        const w = new Worker(d.url, t.keys.w, { types: ['report.export'], waitSeconds: 2, handler: async () => 'ok' });
        w.start();
        const final = await waiting;
        await w.stop();
        await proxy.close();
        assert.equal(final.status, 'succeeded');
        assert.equal(job.followedBy, 'poll');
        assert.equal(refused.length, 1, 'one attempt at the stream, then polling');
        const polls = proxy.log.filter((r) => r.method === 'GET' && /\/v1\/jobs\/job_[^/?]*$/.test(r.url));
        assert.ok(polls.length >= 3, `polls: ${polls.length}`);
        // A queued report.export job answers Retry-After: 3 (half of the 5 s default estimate, rounded up):
        // the polls are at least ~3 s apart, never the 1 s of a client that ignores it.
        for (let i = 1; i < polls.length; i++) {
            const gap = polls[i].at - polls[i - 1].at;
            assert.ok(gap >= 1900, `poll ${i} came ${gap} ms after the one before: Retry-After not obeyed`);
        }
        assert.ok(inm.slice(1).every((v) => typeof v === 'string' && v.startsWith('"')), `If-None-Match on every poll after the first: ${JSON.stringify(inm)}`);
    });

    it('lists every job over pages, cancels, retries and reads results', async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const ids = [];
        for (let i = 0; i < 7; i++) ids.push((await client.submit('email.send', { i })).id);
        const listed = [];
        for await (const j of client.list({ type: 'email.send', limit: 2 })) listed.push(j.id);
        assert.deepEqual([...listed].sort(), [...ids].sort());
        const cancelled = await client.cancel(ids[0]);
        assert.equal(cancelled.status, 'cancelled');
        const retried = await client.retry(ids[0]);
        assert.notEqual(retried.id, ids[0]);
        assert.equal(retried.data.retryOf, ids[0]);
        await assert.rejects(client.result(ids[1]), (e) => e instanceof ProblemError && e.status === 404 && e.code === 'result-not-ready' && e.retryAfter >= 1);
        await assert.rejects(client.result(ids[0]), (e) => e instanceof ProblemError && e.status === 409 && e.code === 'job-cancelled');
    });

    it('turns error answers into typed problems', async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        await assert.rejects(client.submit('video.transcode', {}), (e) => {
            assert.ok(e instanceof ProblemError);
            assert.equal(e.status, 422);
            assert.equal(e.code, 'validation-failed');
            assert.match(e.type, /validation-failed$/);
            assert.ok(e.title);
            assert.deepEqual(e.errors.map((x) => x.pointer), ['/payload/sourceUrl']);
            return true;
        });
        await assert.rejects(client.submit('no.such.type', {}), (e) => e instanceof ProblemError && e.code === 'unknown-type');
        await assert.rejects(new Client(d.url, 'wrong-key').get('job_x'), (e) => e instanceof ProblemError && e.status === 401 && e.code === 'unauthorized');
        await assert.rejects(client.get('job_AAAAAAAAAAAAAAAAAAAAAAAAAAAA'), (e) => e instanceof ProblemError && e.status === 404 && e.code === 'not-found' && Boolean(e.detail));
        // A worker's key may not submit.
        await assert.rejects(new Client(d.url, t.keys.w).submit('email.send', {}), (e) => e instanceof ProblemError && e.status === 403 && e.code === 'forbidden');
    });
});
