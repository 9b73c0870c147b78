// usage.ts - type-checked by `tsc --noEmit` (tsconfig.json), never run: a user of the library, written against
// the types generated from docs/openapi.json. A change of the API document that the library does not follow
// (a member renamed or retyped, a status added or gone) makes this file, or index.d.ts, fail the check.

import { Client, Worker, verifyWebhook, ProblemError, isTerminal } from '../index.js';
import type { BatchData, BatchStatus, Schedule, JobData, JobStatus, Priority, ProgressEvent, LeasedJob, WebhookEvent, Artifact } from '../index.js';

const client = new Client('http://127.0.0.1:8080', 'key');
const priority: Priority = 'high';
const job = await client.submit('report.export', { month: '2026-11' }, { priority, maxAttempts: 3, group: 'customer-42', idempotencyKey: 'k-1', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
const final: JobData<{ month: string }> = await job.wait({
    timeout: 60_000,
    onProgress: (e: ProgressEvent) => {
        const p: number | null = e.progress;
        const s: JobStatus = e.status;
        void p, s;
    },
});
const statuses: Record<JobStatus, true> = { queued: true, running: true, succeeded: true, failed: true, cancelled: true, partialSuccess: true };
const month: string = final.payload.month;
const attempt: number = final.attempt;
const cancelRequested: boolean = final.cancelRequested;
const finishedAt: string | null = final.finishedAt;
const events: string = final.links.events;
const size: number | undefined = final.artifact?.size;
const code: string | undefined = final.error?.code;
const terminal: boolean = isTerminal(final.status);
void statuses, month, attempt, cancelRequested, finishedAt, events, size, code, terminal;

for await (const j of client.list({ status: 'queued', type: 'report.export' })) {
    const id: string = j.id;
    void id;
}
const r = await client.result(job.id, { stream: true });
if (r && typeof r === 'object' && 'body' in r) {
    const a = r as Artifact;
    void a.digest;
}

try {
    await client.cancel(job.id);
} catch (e) {
    if (e instanceof ProblemError) {
        const pointers: string[] = e.errors.map((x) => x.pointer);
        const status: number = e.status;
        void pointers, status, e.code, e.retryAfter;
    }
}

const worker = new Worker<{ width: number }>('http://127.0.0.1:8080', 'wkey', {
    types: ['image.resize'],
    concurrency: 4,
    handler: async (lease: LeasedJob<{ width: number }>, ctx) => {
        const leaseId: string = lease.leaseId;
        const traceparent: string | undefined = lease.traceparent;
        const tracestate: string | undefined = lease.tracestate;
        void traceparent, tracestate;
        const n: number = lease.attempt;
        await ctx.progress(50, 'half');
        if (ctx.signal.aborted || ctx.cancelRequested) throw ctx.signal.reason;
        if (lease.payload.width > 1000) {
            const up = await ctx.uploadArtifact(new Uint8Array(10), { contentType: 'image/png' });
            const digest: string = up.digest;
            void digest;
            return;
        }
        return { width: lease.payload.width, leaseId, n };
    },
});
void worker.start();

const ev: WebhookEvent = verifyWebhook({ 'webhook-id': 'x' }, '{}', ['whsec_x'], { toleranceSeconds: 60 });
const evType: string = ev.type;
const jobUrl: string | undefined = ev.data.job;
const batchUrl: string | undefined = ev.data.batch;
void evType, jobUrl, batchUrl;

const batch = await client.submitBatch([{ type: 'image.resize', payload: { n: 1 } }, { type: 'report.export', priority: 'low' }], { callbackUrl: 'https://example.com/hook' });
const bfinal: BatchData = await batch.wait({ timeout: 60_000, onProgress: (b: BatchData) => void b.counts.succeeded });
const bstatus: BatchStatus = bfinal.status;
const bcounts: number = bfinal.counts.succeeded + bfinal.counts.partialSuccess + bfinal.total;
const bprogress: number = bfinal.progress;
for await (const j of batch.jobs({ limit: 50 })) void (j.batchId satisfies string | null | undefined);
await batch.cancel();
void bstatus, bcounts, bprogress;

const sched: Schedule = await client.schedules.create({ id: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', job: { type: 'report.export', payload: {} }, overlap: 'skip' });
const next: string | null = sched.nextRunAt;
const upcoming: string[] = sched.upcoming;
const runs: Array<{ fireTime: string; jobId: string }> = sched.recentRuns;
await client.schedules.update('nightly', { paused: true, timezone: null });
const triggered: Schedule = await client.schedules.trigger('nightly');
for await (const s of client.schedules.list()) void (s.id satisfies string);
await client.schedules.delete('nightly');
void next, upcoming, runs, triggered;
