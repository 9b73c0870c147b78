// index.d.ts - the library's types, hand-written over the ones generated from docs/openapi.json
// (types/openapi.d.ts, made by `npm run types` or `make clients-node`): every shape the daemon answers comes
// from the API document, so a change there that the library does not follow fails `tsc --noEmit`.

import type { components } from './types/openapi.js';

type Schemas = components['schemas'];
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A job as GET /v1/jobs/{id} answers it, with its payload typed as the caller's. */
export type JobData<P = Record<string, any>> = Omit<Schemas['Job'], 'payload'> & { payload: P };
export type JobStatus = Schemas['JobStatus'];
export type Priority = Schemas['Priority'];
export type Problem = Schemas['Problem'];
export type ArtifactInfo = Schemas['Artifact'];
/** A status or progress event of GET /v1/jobs/{id}/events. */
export type ProgressEvent = Schemas['SseStatusEvent'];
/** The members of a submit's body besides type and payload (all optional: those with a default too). */
export type SubmitBody = Partial<Omit<Schemas['JobRequest'], 'type' | 'payload'>>;
/** A lean lease (Prefer: return=minimal), with its payload typed as the caller's. */
export type LeasedJob<P = Record<string, any>> = Omit<Schemas['LeanLease'], 'payload'> & { payload: P };
/** A webhook event as delivered (the signed body). */
export type WebhookEvent = Schemas['WebhookEvent'];

export declare function isTerminal(status: JobStatus | undefined): boolean;

export declare class ProblemError extends Error {
    readonly problem: Problem;
    readonly status: number;
    readonly type: string;
    readonly code: string | null;
    readonly title: string | null;
    readonly detail: string | null;
    readonly instance: string | null;
    readonly errors: NonNullable<Problem['errors']>;
    readonly headers: Headers | null;
    /** Retry-After of the answer, in seconds, when it had one. */
    readonly retryAfter: number | null;
}

export interface ClientOptions {
    fetch?: typeof fetch;
    userAgent?: string;
}

export interface SubmitOptions extends SubmitBody {
    /** Default: a new UUID. false: send none. */
    idempotencyKey?: string | false;
    /** The caller's W3C trace context: the job continues that trace (docs/tracing.md). */
    traceparent?: string;
    tracestate?: string;
    signal?: AbortSignal;
}

export interface WaitOptions {
    signal?: AbortSignal;
    /** Milliseconds; the wait (not the job) then rejects with a TimeoutError. */
    timeout?: number;
    onProgress?: (event: ProgressEvent, meta: { event: 'status' | 'progress' | 'poll'; id: string | null }) => void;
    /** false: poll from the start. */
    sse?: boolean;
}

export interface Artifact {
    status: number;
    contentType: string | null;
    size: number | null;
    digest: string | null;
    etag: string | null;
    /** How many times the download was resumed (a Range request from where it broke) so far. */
    resumed: number;
    body: ReadableStream<Uint8Array> | import('node:stream').Readable;
}

export interface ResultOptions {
    signal?: AbortSignal;
    stream?: boolean;
    nodeStream?: boolean;
    range?: string;
}

export declare class Job<P = Record<string, any>> {
    readonly id: Schemas['JobId'];
    data: JobData<P>;
    readonly status: JobStatus;
    lastEventId: string | null;
    etag: string | null;
    idempotencyKey?: string | null;
    replayed?: boolean;
    followedBy: 'sse' | 'poll' | null;
    get(options?: { signal?: AbortSignal }): Promise<JobData<P>>;
    wait(options?: WaitOptions): Promise<JobData<P>>;
    cancel(options?: { signal?: AbortSignal }): Promise<JobData<P>>;
    retry(options?: { signal?: AbortSignal }): Promise<Job<P>>;
    result(options?: ResultOptions): Promise<Json | Artifact>;
}

export interface ListOptions {
    status?: JobStatus;
    type?: string;
    updatedAfter?: string;
    limit?: number;
    signal?: AbortSignal;
}

export type BatchData = Schemas['JobBatch'];
export type BatchStatus = Schemas['JobBatch']['status'];
/** One job of a batch: a submit body without what a batch's item may not carry. */
export type BatchJob = Omit<SubmitBody, 'uniqueKey' | 'debounceSeconds' | 'callbackUrl'> & { type: string; payload?: Record<string, any> };

export interface BatchWaitOptions {
    signal?: AbortSignal;
    /** Milliseconds; the wait (not the batch) then rejects with a TimeoutError. */
    timeout?: number;
    onProgress?: (batch: BatchData, meta: { event: 'batch' | 'poll'; id: string | null }) => void;
    /** false: poll from the start. */
    sse?: boolean;
}

export declare class Batch {
    readonly id: string;
    data: BatchData;
    readonly status: BatchStatus;
    lastEventId: string | null;
    etag: string | null;
    followedBy: 'sse' | 'poll' | null;
    get(options?: { signal?: AbortSignal }): Promise<BatchData>;
    wait(options?: BatchWaitOptions): Promise<BatchData>;
    jobs(options?: { limit?: number; signal?: AbortSignal }): AsyncIterableIterator<JobData>;
    cancel(options?: { signal?: AbortSignal }): Promise<BatchData>;
}

/** A schedule's job template: a submit body. */
export type ScheduleJob = SubmitBody & { type: string; payload?: Record<string, any> };
export type Schedule = Omit<Schemas['Schedule'], 'job'> & { job: ScheduleJob };
export type ScheduleCreate = Omit<Schemas['ScheduleCreate'], 'job'> & { job: ScheduleJob };
/** A merge patch of a schedule (null sends a member back to its default). */
export type SchedulePatch = { [K in keyof Omit<Schemas['ScheduleDefinition'], 'job'>]?: Schemas['ScheduleDefinition'][K] | null } & { job?: ScheduleJob };

export declare class Schedules {
    create(definition: ScheduleCreate, options?: { signal?: AbortSignal }): Promise<Schedule>;
    get(id: string, options?: { signal?: AbortSignal }): Promise<Schedule>;
    list(options?: { limit?: number; signal?: AbortSignal }): AsyncIterableIterator<Schedule>;
    update(id: string, patch: SchedulePatch, options?: { signal?: AbortSignal }): Promise<Schedule>;
    delete(id: string, options?: { signal?: AbortSignal }): Promise<void>;
    trigger(id: string, options?: { signal?: AbortSignal }): Promise<Schedule>;
}

export declare class Client {
    constructor(url: string, key?: string | null, options?: ClientOptions);
    readonly schedules: Schedules;
    job(id: string): Job;
    batch(id: string): Batch;
    submitBatch(jobs: BatchJob[], options?: { callbackUrl?: string; signal?: AbortSignal }): Promise<Batch>;
    submit<P extends Record<string, any> = Record<string, any>>(type: string, payload?: P, options?: SubmitOptions): Promise<Job<P>>;
    get(id: string, options?: { signal?: AbortSignal }): Promise<JobData>;
    list(options?: ListOptions): AsyncIterableIterator<JobData>;
    cancel(id: string, options?: { signal?: AbortSignal }): Promise<JobData>;
    retry(id: string, options?: { signal?: AbortSignal }): Promise<Job>;
    result(id: string, options?: ResultOptions): Promise<Json | Artifact>;
}

export declare class JobAborted extends Error {
    readonly code: 'cancel-requested' | 'lease-lost' | 'worker-stopped';
}

export type ArtifactSource = Uint8Array | string | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array>;

export interface HandlerContext {
    /** Aborts with a JobAborted: a cancel was requested, the lease was lost, or the worker stops ({abort: true}). */
    readonly signal: AbortSignal;
    readonly cancelRequested: boolean;
    /** Report progress (0-100) and a message; sent with a heartbeat at once. */
    progress(progress: number | null, message?: string | null): Promise<void>;
    /** Upload the job's artifact in parts; the job then completes with it. */
    uploadArtifact(source: ArtifactSource, options?: { contentType?: string }): Promise<Schemas['ArtifactUpload']>;
}

export interface WorkerOptions<P> {
    types: string[];
    handler: (job: LeasedJob<P>, ctx: HandlerContext) => Promise<Json | void> | Json | void;
    concurrency?: number;
    leaseSeconds?: number;
    heartbeatSeconds?: number;
    waitSeconds?: number;
    name?: string;
    partSize?: number;
    onError?: (error: Error) => void;
    fetch?: typeof fetch;
}

export declare class Worker<P = Record<string, any>> {
    constructor(url: string, key: string | null, options: WorkerOptions<P>);
    readonly stats: { succeeded: number; failed: number; cancelled: number; lost: number };
    resumedParts?: number;
    start(): Promise<void>;
    stop(options?: { abort?: boolean }): Promise<void>;
}

export declare class WebhookVerificationError extends Error {}

export interface VerifyOptions {
    toleranceSeconds?: number;
    nowSeconds?: number;
    schemes?: Array<'standard' | 'stripe'>;
}

export declare function verifyWebhook(
    headers: Headers | Record<string, string | string[] | undefined>,
    body: string | Uint8Array,
    secrets: string | string[],
    options?: VerifyOptions,
): WebhookEvent;
