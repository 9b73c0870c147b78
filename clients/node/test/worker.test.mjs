// Worker against the real daemon: 4 loops run 200 jobs, one handler crash (the job comes back and succeeds on
// its next attempt) and one cancel (the handler's signal aborts with cancel-requested, and the job ends
// cancelled); an artifact of 64 MiB goes up in parts through a proxy that cuts one part 1 MiB in (the upload
// resumes from the daemon's offset) and loses another's answer (the next part follows), and comes back down through a proxy that cuts it twice (the download resumes
// with Range requests) with its digest checked.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Client, Worker } from '../src/index.mjs';
import { startDaemon, tenant, startProxy } from './helpers.mjs';

describe('Worker', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(async () => {
        await d?.stop();
    });

    // Bounded (timeout) so that a library that lost a path fails here rather than hangs.
    it('runs 200 jobs with concurrency 4: a crashed attempt comes back, a cancel reaches the handler', { timeout: 240_000 }, async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const jobs = [];
        for (let i = 0; i < 200; i++) jobs.push(await client.submit('image.resize', { i }));
        const CRASH = 13;
        const CANCEL = 77;
        let inFlight = 0;
        let maxInFlight = 0;
        const attempts = new Map();
        let cancelSeen = null;
        let startedCancel;
        const cancelStarted = new Promise((r) => (startedCancel = r));
        const w = new Worker(d.url, t.keys.w, {
            types: ['image.resize'],
            concurrency: 4,
            leaseSeconds: 3, // heartbeats every second
            waitSeconds: 2,
            onError: (e) => assert.fail(`worker error: ${e.stack}`),
            handler: async (job, ctx) => {
                inFlight++;
                maxInFlight = Math.max(maxInFlight, inFlight);
                try {
                    const i = job.payload.i;
                    attempts.set(i, (attempts.get(i) ?? 0) + 1);
                    if (i === CRASH && job.attempt === 1) throw new Error('the handler crashed');
                    if (i === CANCEL) {
                        startedCancel();
                        await new Promise((resolve, reject) => {
                            const t = setTimeout(() => reject(new Error('no cancel reached the handler')), 20_000);
                            ctx.signal.addEventListener('abort', () => {
                                clearTimeout(t);
                                cancelSeen = { code: ctx.signal.reason?.code, flag: ctx.cancelRequested };
                                reject(ctx.signal.reason);
                            });
                        });
                    }
                    await new Promise((r) => setTimeout(r, 5));
                    return { done: i };
                } finally {
                    inFlight--;
                }
            },
        });
        w.start();
        let finals;
        try {
            await cancelStarted;
            const c = await client.cancel(jobs[CANCEL].id);
            assert.equal(c.cancelRequested, true);
            finals = await Promise.all(jobs.map((j) => j.wait({ timeout: 90_000 })));
        } finally {
            await w.stop({ abort: true });
        }

        const by = (s) => finals.filter((f) => f.status === s).length;
        assert.equal(by('succeeded'), 199, JSON.stringify(finals.filter((f) => f.status !== 'succeeded').map((f) => [f.payload, f.status])));
        assert.equal(finals[CANCEL].status, 'cancelled');
        assert.deepEqual(cancelSeen, { code: 'cancel-requested', flag: true });
        assert.equal(finals[CRASH].status, 'succeeded');
        assert.equal(finals[CRASH].attempt, 2, 'the crashed attempt came back and the second one succeeded');
        assert.equal(attempts.get(CRASH), 2);
        for (let i = 0; i < 200; i++) if (i !== CANCEL) assert.deepEqual(finals[i].result, { done: i });
        assert.equal(maxInFlight, 4, 'four handlers at once, never more');
        assert.deepEqual(w.stats, { succeeded: 199, failed: 1, cancelled: 1, lost: 0 });
    });

    it('uploads a 64 MiB artifact in parts through interruptions, and downloads it through cuts with its digest', { timeout: 240_000 }, async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const data = randomBytes(64 << 20);
        const want = createHash('sha256').update(data).digest();
        let puts = 0;
        const proxy = await startProxy(d.url, (req) => {
            if (req.method !== 'PUT') return null;
            puts++;
            if (puts === 3) return { cutRequestAfter: 1 << 20 }; // the third part is cut 1 MiB in
            if (puts === 7) return 'lose'; // the sixth part arrives, its answer does not
            return null;
        });
        const job = await client.submit('report.export', { big: true });
        const w = new Worker(proxy.url, t.keys.w, {
            types: ['report.export'],
            waitSeconds: 2,
            onError: (e) => assert.fail(`worker error: ${e.stack}`),
            handler: async (_job, ctx) => {
                // A stream of odd-sized chunks: the library regroups them into parts.
                async function* chunks() {
                    for (let off = 0; off < data.length; off += 1_000_003) yield data.subarray(off, off + 1_000_003);
                }
                const up = await ctx.uploadArtifact(chunks(), { contentType: 'application/x-test' });
                assert.equal(up.size, data.length);
            },
        });
        w.start();
        let final;
        try {
            final = await job.wait({ timeout: 120_000 });
        } finally {
            await w.stop({ abort: true });
            await proxy.close();
        }
        assert.equal(final.status, 'succeeded', JSON.stringify(final));
        assert.equal(final.artifact.size, 64 << 20);
        assert.equal(final.artifact.digest, `sha-256=:${want.toString('base64')}:`);
        assert.equal(puts, 17, 'parts sent: 16 of 4 MiB, and the one cut short again');
        assert.equal(w.resumedParts, 1, 'the part that arrived is not sent again');
        const heads = proxy.log.filter((r) => r.method === 'HEAD');
        assert.equal(heads.length, 2, 'the offset asked after each interruption');

        // Downloaded through a proxy that cuts the answer twice (after 10 MiB, then 20 MiB more): the library
        // resumes each time with a Range request from the byte where it broke.
        const cuts = [10 << 20, 20 << 20];
        const down = await startProxy(d.url, (req) => (req.method === 'GET' && req.url.endsWith('/result') && cuts.length ? { cutAfter: cuts.shift() } : null));
        let res;
        const h = createHash('sha256');
        let n = 0;
        try {
            res = await new Client(down.url, t.keys.c).result(job.id);
            assert.equal(res.contentType, 'application/x-test');
            assert.equal(res.size, 64 << 20);
            assert.equal(res.digest, final.artifact.digest);
            for await (const c of res.body) {
                h.update(c);
                n += c.length;
            }
        } finally {
            await down.close();
        }
        assert.equal(res.resumed, 2);
        const gets = down.log.filter((r) => r.method === 'GET');
        assert.equal(gets.length, 3);
        assert.equal(gets[0].headers.range, undefined);
        // Each resume starts where the bytes stopped arriving: at the cut (or a little before it, had the
        // client not read the last bytes the proxy sent before it closed).
        const [r1, r2] = gets.slice(1).map((r) => Number(/^bytes=(\d+)-$/.exec(r.headers.range)?.[1]));
        assert.ok(r1 > 0 && r1 <= 10 << 20 && r2 > r1 && r2 <= r1 + (20 << 20), `resumed at ${r1}, ${r2}`);
        assert.ok(gets.slice(1).every((r) => r.headers['if-range'] === res.etag));
        assert.equal(n, 64 << 20);
        assert.ok(h.digest().equals(want), 'the downloaded bytes are the uploaded ones');
    });
});

// Trace context (docs/tracing.md): a job submitted with a traceparent is leased with its trace; the handler
// sees it on the job, and each of the worker's calls about the job (heartbeats, the upload's parts, the
// report) sends the lease's traceparent, as `acceptd worker` does.
describe('Worker trace context', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(async () => {
        await d?.stop();
    });

    it('hands the lease trace to the handler and sends its traceparent on heartbeats, uploads and reports', { timeout: 120_000 }, async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
        const parent = `00-${traceId}-00f067aa0ba902b7-01`;
        const traced = await client.submit('report.export', { n: 1 }, { traceparent: parent, tracestate: 'vendor=x' });
        const plain = await client.submit('email.send', { n: 2 });
        const proxy = await startProxy(d.url);
        const seen = {};
        const w = new Worker(proxy.url, t.keys.w, {
            types: ['report.export', 'email.send'],
            partSize: 1024,
            waitSeconds: 2,
            onError: (e) => assert.fail(`worker error: ${e.stack}`),
            handler: async (job, ctx) => {
                seen[job.type] = { traceparent: job.traceparent, tracestate: job.tracestate };
                await ctx.progress(50, 'half');
                if (job.type === 'report.export') await ctx.uploadArtifact(randomBytes(3000));
                return job.type === 'report.export' ? undefined : { ok: true };
            },
        });
        w.start();
        try {
            assert.equal((await traced.wait({ timeout: 60_000 })).status, 'succeeded');
            assert.equal((await plain.wait({ timeout: 60_000 })).status, 'succeeded');
        } finally {
            await w.stop({ abort: true });
            await proxy.close();
        }
        const tp = seen['report.export'].traceparent;
        assert.match(tp, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), 'the handler sees the job trace');
        assert.notEqual(tp, parent, "the parent is acceptd's span of the attempt");
        assert.match(seen['report.export'].tracestate, /^acceptd=[0-9a-f]{16},vendor=x$/);
        assert.deepEqual(seen['email.send'], { traceparent: undefined, tracestate: undefined });
        const about = (id) => proxy.log.filter((r) => r.url.startsWith(`/v1/jobs/${id}`));
        const calls = about(traced.id);
        const kinds = new Set(calls.map((r) => `${r.method} ${r.url.replace(/^\/v1\/jobs\/[^/:]+/, '')}`));
        assert.ok(kinds.has('POST :heartbeat') && kinds.has('PUT /result') && kinds.has('POST :complete'), [...kinds].join(', '));
        for (const r of calls) assert.equal(r.headers.traceparent, tp, `${r.method} ${r.url} carries the lease traceparent`);
        assert.ok(about(plain.id).length >= 2);
        for (const r of about(plain.id)) assert.equal(r.headers.traceparent, undefined, 'an untraced job sends none');
    });
});
