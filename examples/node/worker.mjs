#!/usr/bin/env node
// A worker for acceptd in Node, on the acceptd library (clients/node): lease, heartbeat with progress,
// complete.
//
//   ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... node examples/node/worker.mjs TYPE [--jobs N]
//
// The library's Worker parks a lease request (the daemon holds it until a job of TYPE is queued), runs work()
// on each job while heartbeats extend the lease, and completes the job with what work() returns: here, the
// payload echoed back with the number of its keys. Each step reports its progress (a heartbeat) and stops when
// a cancel was requested (ctx.signal aborts; the library then acknowledges the cancel). Runs until N jobs are
// done (default: forever) or SIGINT/SIGTERM; prints each step on stderr.
//
// A traced job (its submit carried a W3C traceparent: docs/tracing.md) continues its trace here: the lease's
// traceparent is on the job, the library sends it on its own calls about the job, and work() logs the trace id
// and the traceparent it would send on its own calls downstream (a child span of the attempt's).

// In your project: `npm install ./clients/node` and import from 'acceptd'.
import { randomBytes } from 'node:crypto';
import { Worker } from '../../clients/node/src/index.mjs';

const [type, flag, n] = process.argv.slice(2);
if (!type || (flag !== undefined && (flag !== '--jobs' || !(Number(n) > 0)))) {
    console.error('usage: node worker.mjs TYPE [--jobs N]');
    process.exit(2);
}
const limit = flag ? Number(n) : Infinity;
const log = (msg) => console.error(`worker: ${msg}`);
const sleep = (ms, signal) => new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), reject(signal.reason)), { once: true });
});

// A child of the lease's traceparent (version-traceid-parentid-flags): the same trace, a new span id.
const childOf = (tp) => {
    const [version, traceId, , flags] = tp.split('-');
    return { traceId, traceparent: `${version}-${traceId}-${randomBytes(8).toString('hex')}-${flags}` };
};

let done = 0;
const worker = new Worker((process.env.ACCEPTD_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, ''), process.env.ACCEPTD_KEY, {
    types: [type],
    concurrency: 1,
    onError: (e) => log(`error: ${e.message}`),
    // The job's work: three steps, a heartbeat with progress after each. Throwing after a cancel request (the
    // signal's abort) makes the library acknowledge the cancel.
    handler: async (job, ctx) => {
        log(`${job.id}: leased (attempt ${job.attempt})`);
        if (job.traceparent) {
            const { traceId, traceparent } = childOf(job.traceparent);
            // Pass it on: a downstream call sends `traceparent` (and the lease's `tracestate`) as its headers.
            log(`${job.id}: trace ${traceId} (lease ${job.traceparent}); downstream traceparent ${traceparent}`);
        }
        for (const [step, progress] of [25, 50, 75].entries()) {
            await sleep(100, ctx.signal); // stands for real work
            await ctx.progress(progress, `step ${step + 1} of 3`);
            log(`${job.id}: heartbeat progress=${progress}`);
        }
        const payload = job.payload ?? {};
        if (++done >= limit) worker.stop(); // leases no more; this job is still reported
        log(`${job.id}: completing`);
        return { echo: payload, keys: Object.keys(payload).length, worker: 'node' };
    },
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => worker.stop({ abort: true }));
await worker.start();
log(`stopped after ${done} job(s): ${JSON.stringify(worker.stats)}`);
