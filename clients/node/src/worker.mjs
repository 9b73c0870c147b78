// worker.mjs - the working side: Worker runs `concurrency` loops, each parked on POST /v1/leases (wait) until
// a job of its types comes, running the handler, heartbeating the lease while it runs, and reporting the
// outcome with the loop's next lease asked for in the same call ("next"), with Prefer: return=minimal so that
// each lease is only what a worker needs. A loop's leases and reports go over a keep-alive connection of its
// own (conn.mjs); heartbeats and uploads, which run beside the handler, over the Transport's node:http pool. A cancel request (seen in a heartbeat's answer) or a lost lease
// aborts the handler's AbortSignal; a handler that then throws is acknowledged as cancelled. Artifacts go up
// in parts (PUT /v1/jobs/{id}/result with Upload-Offset) and a part that did not arrive is resumed from the
// offset the daemon reports (HEAD). A traced job's lease carries its trace context (traceparent, tracestate:
// docs/tracing.md); the handler sees it on the job, and every call of the worker about that job (heartbeats,
// reports, uploads) sends that traceparent, as `acceptd worker` does.

import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Connection } from './conn.mjs';
import { ProblemError, Transport, sleep } from './http.mjs';

const enc = encodeURIComponent;
const MINIMAL = { prefer: 'return=minimal' };

/** The headers of a call about lease's job: Prefer: return=minimal, and the lease's traceparent if it has one. */
function jobHeaders(lease, extra = MINIMAL) {
    return lease.traceparent ? { ...extra, traceparent: lease.traceparent } : extra;
}

/** Why a handler's signal aborted: reason.code is 'cancel-requested', 'lease-lost' or 'worker-stopped'. */
export class JobAborted extends Error {
    constructor(code, message) {
        super(message);
        this.name = 'JobAborted';
        this.code = code;
    }
}

function b64sha256(buf) {
    return createHash('sha256').update(buf).digest('base64');
}

/** Bytes of source (Uint8Array, string, async iterable or web stream) regrouped into parts of partSize. */
async function* partsOf(source, partSize) {
    if (typeof source === 'string') source = Buffer.from(source);
    if (source instanceof Uint8Array) {
        for (let off = 0; off < source.length || off === 0; off += partSize) {
            yield source.subarray(off, Math.min(source.length, off + partSize));
            if (source.length === 0) return;
        }
        return;
    }
    let pending = [];
    let n = 0;
    let parts = 0;
    for await (const chunk of source) {
        let c = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        while (c.length > 0) {
            const take = Math.min(c.length, partSize - n);
            pending.push(c.subarray(0, take));
            n += take;
            c = c.subarray(take);
            if (n === partSize) {
                parts++;
                yield Buffer.concat(pending);
                pending = [];
                n = 0;
            }
        }
    }
    if (n > 0 || parts === 0) yield Buffer.concat(pending); // the rest, or the one empty part of an empty source
}

/**
 * new Worker(url, key, {types, handler, concurrency}). handler(job, ctx) gets the lean lease {id, type,
 * payload, attempt, leaseId, leaseExpiresAt, and traceparent and tracestate for a traced job} and ctx = {signal, progress(p, message), uploadArtifact(source,
 * {contentType}), cancelRequested}; what it returns is the job's result (or, after uploadArtifact, the job
 * completes with its artifact). Throwing fails the attempt (retried while attempts remain; an error with
 * retryable === false fails the job); throwing after a cancel request acknowledges the cancel.
 */
export class Worker {
    constructor(url, key, { types, handler, concurrency = 1, leaseSeconds = 30, heartbeatSeconds, waitSeconds = 30, name, partSize = 4 << 20, onError, fetch } = {}) {
        if (!Array.isArray(types) || types.length === 0) throw new TypeError('acceptd: Worker needs types');
        if (typeof handler !== 'function') throw new TypeError('acceptd: Worker needs a handler');
        this.transport = new Transport(url, key, { fetch });
        // Each loop's leases and reports go over a connection of its own (conn.mjs), unless fetch is given.
        this.loopConnection = () => (fetch ? null : new Connection(url));
        this.key = key;
        this.url = url;
        this.types = types;
        this.handler = handler;
        this.concurrency = concurrency;
        this.leaseSeconds = leaseSeconds;
        this.heartbeatMs = (heartbeatSeconds ?? leaseSeconds / 3) * 1000;
        this.waitSeconds = waitSeconds;
        this.name = name ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
        this.partSize = partSize;
        this.onError = onError ?? ((e) => process.emitWarning(`acceptd worker: ${e.message}`));
        this.stopping = new AbortController();
        this.loops = null;
        this.running = new Map(); // job id -> {due, kick, abort} of its handler's run
        this.ticker = null;
        this.stats = { succeeded: 0, failed: 0, cancelled: 0, lost: 0 };
    }

    /** Start the loops (idempotent). Resolves once they have all ended (after stop()). */
    start() {
        if (this.loops) return this.loops;
        // One timer for every running job: each is heartbeaten once its heartbeatMs has passed (checked four
        // times a heartbeat period, so a beat comes at most a quarter period late).
        this.ticker = setInterval(() => {
            const now = Date.now();
            for (const e of this.running.values()) {
                if (now < e.due) continue;
                e.due = now + this.heartbeatMs;
                e.kick?.();
            }
        }, Math.max(10, Math.min(1000, this.heartbeatMs / 4)));
        this.ticker.unref(); // the loops' requests hold the process, not the timer
        this.loops = Promise.all(Array.from({ length: this.concurrency }, () => this.#loop()));
        return this.loops;
    }

    /** Stop leasing; running handlers finish (or, with {abort: true}, see their signal abort). */
    async stop({ abort = false } = {}) {
        this.stopping.abort(new JobAborted('worker-stopped', 'the worker is stopping'));
        if (abort) for (const e of this.running.values()) e.abort(new JobAborted('worker-stopped', 'the worker is stopping'));
        try {
            await this.loops;
        } finally {
            clearInterval(this.ticker);
            this.ticker = null;
        }
    }

    #lease() {
        return { types: this.types, max: 1, leaseSeconds: this.leaseSeconds, worker: this.name };
    }

    async #loop() {
        const stop = this.stopping.signal;
        const conn = this.loopConnection();
        const own = conn ? new Transport(this.url, this.key, { fetch: conn.fetch }) : this.transport;
        try {
            await this.#loopOn(own, stop);
        } finally {
            conn?.close();
        }
    }

    async #loopOn(own, stop) {
        let next = null; // a lease handed over by the previous report
        while (!stop.aborted) {
            if (!next) {
                try {
                    const { res, body } = await own.json('POST', '/v1/leases', { json: { ...this.#lease(), wait: this.waitSeconds }, headers: MINIMAL, signal: stop });
                    if (res.status === 204 || !body?.leases?.length) continue;
                    next = body.leases[0];
                } catch (e) {
                    if (stop.aborted) break;
                    this.onError(e);
                    await sleep(e instanceof ProblemError && e.retryAfter ? e.retryAfter * 1000 : 1000, stop).catch(() => {});
                    continue;
                }
            }
            const lease = next;
            next = null;
            try {
                next = await this.#run(lease, !stop.aborted, own);
            } catch (e) {
                this.onError(e);
            }
        }
        if (next) {
            // Stopped with a lease in hand: give it back at once rather than let it expire.
            await own.call('POST', `/v1/jobs/${enc(next.id)}:release`, { json: { leaseId: next.leaseId }, headers: jobHeaders(next, {}) }).catch(() => {});
        }
    }

    // Run one leased job and report it; resolves the next lease the report brought, or null.
    async #run(lease, wantNext, own) {
        // The handler's AbortController is made only when the handler asks for its signal (most never do).
        let ac = null;
        let abortReason = null;
        const abort = (reason) => {
            if (abortReason) return;
            abortReason = reason;
            ac?.abort(reason);
        };
        const signal = () => {
            if (!ac) {
                ac = new AbortController();
                if (abortReason) ac.abort(abortReason);
            }
            return ac.signal;
        };
        const entry = { due: Date.now() + this.heartbeatMs, abort, kick: null };
        this.running.set(lease.id, entry);
        const state = { progress: undefined, message: undefined, artifact: false, cancelRequested: false, lost: false };
        const path = `/v1/jobs/${enc(lease.id)}`;
        let beating = Promise.resolve();
        const beat = async () => {
            const json = { leaseId: lease.leaseId, leaseSeconds: this.leaseSeconds };
            if (state.progress !== undefined) json.progress = state.progress;
            if (state.message !== undefined) json.message = state.message;
            try {
                const { body } = await this.transport.json('POST', `${path}:heartbeat`, { json, headers: jobHeaders(lease) });
                if (body.cancelRequested && !state.cancelRequested) {
                    state.cancelRequested = true;
                    abort(new JobAborted('cancel-requested', 'a cancel of the job was requested'));
                }
            } catch (e) {
                if (e instanceof ProblemError && (e.status === 409 || e.status === 404 || e.status === 410)) {
                    state.lost = true;
                    abort(new JobAborted('lease-lost', `the lease is lost: ${e.message}`));
                } else this.onError(e);
            }
        };
        entry.kick = () => {
            beating = beating.then(beat);
        };
        const ctx = {
            get signal() {
                return signal();
            },
            get cancelRequested() {
                return state.cancelRequested;
            },
            progress: (progress, message) => {
                state.progress = progress;
                if (message !== undefined) state.message = message;
                beating = beating.then(beat);
                return beating;
            },
            uploadArtifact: async (source, opts = {}) => {
                const r = await this.#upload(lease, source, { ...opts, signal: signal() });
                state.artifact = true;
                return r;
            },
        };
        let outcome;
        try {
            outcome = { ok: true, value: await this.handler(lease, ctx) };
        } catch (e) {
            outcome = { ok: false, error: e };
        } finally {
            this.running.delete(lease.id);
        }
        await beating;
        if (state.lost) {
            this.stats.lost++;
            return null;
        }
        const nextReq = wantNext ? { next: this.#lease() } : {};
        let report;
        if (outcome.ok) {
            report = { status: 'succeeded', json: state.artifact ? { leaseId: lease.leaseId, artifact: true } : { leaseId: lease.leaseId, result: outcome.value ?? null }, verb: 'complete' };
        } else if (state.cancelRequested) {
            report = { status: 'cancelled', json: { leaseId: lease.leaseId }, verb: 'cancel' };
        } else {
            const err = outcome.error ?? {};
            const error = { type: 'about:blank', title: String(err.message ?? err).slice(0, 1000) || 'handler failed', status: 500, code: err.code && typeof err.code === 'string' ? err.code : 'handler-error' };
            report = { status: 'failed', json: { leaseId: lease.leaseId, error, retryable: err.retryable !== false }, verb: 'fail' };
        }
        const withNext = report.verb === 'cancel' ? report.json : { ...report.json, ...nextReq };
        // A final report repeated under its lease is answered again, unchanged (docs/protocol.md, Workers): so a
        // report whose answer was lost on the way (a reset keep-alive connection) is sent again.
        for (let tries = 0; ; tries++) {
            try {
                const { body } = await own.json('POST', `${path}:${report.verb}`, { json: withNext, headers: jobHeaders(lease) });
                this.stats[report.status]++;
                return body?.leases?.[0] ?? null;
            } catch (e) {
                if (e instanceof ProblemError && e.status === 409) {
                    this.stats.lost++;
                    return null;
                }
                if ((e instanceof ProblemError && e.status < 500) || tries >= 3) throw e;
                await sleep(200 * (tries + 1));
            }
        }
    }

    /** Upload an artifact for lease in parts; resumes a part from the daemon's offset when it did not arrive. */
    async #upload(lease, source, { contentType = 'application/octet-stream', signal } = {}) {
        const path = `/v1/jobs/${enc(lease.id)}/result`;
        const whole = createHash('sha256');
        let offset = 0;
        let done = null;
        const it = partsOf(source, this.partSize)[Symbol.asyncIterator]();
        let cur = await it.next();
        while (!cur.done) {
            const part = cur.value;
            const nxt = await it.next();
            const last = nxt.done;
            whole.update(part);
            const partEnd = offset + part.length;
            let from = offset;
            let rest = part;
            for (let tries = 0; ; tries++) {
                signal?.throwIfAborted();
                const headers = jobHeaders(lease, {
                    'lease-id': lease.leaseId,
                    'content-type': contentType,
                    'upload-complete': last ? '?1' : '?0',
                    'content-digest': `sha-256=:${b64sha256(rest)}:`,
                });
                if (from > 0) headers['upload-offset'] = String(from);
                if (last) headers['repr-digest'] = `sha-256=:${whole.copy().digest('base64')}:`;
                try {
                    const res = await this.transport.call('PUT', path, { body: rest, headers, signal });
                    if (last) done = await res.json();
                    else await res.body?.cancel().catch(() => {});
                    break;
                } catch (e) {
                    if (signal?.aborted || tries >= 5) throw e;
                    if (e instanceof ProblemError && e.status !== 409 && e.status < 500) throw e;
                    // Where is the upload? Resume from there when it is within this part.
                    const at = await this.#uploadOffset(path, lease, signal);
                    if (at < offset || at > partEnd) throw e;
                    if (at === partEnd && !last) break;
                    rest = part.subarray(at - offset);
                    from = at;
                    this.resumedParts = (this.resumedParts ?? 0) + 1;
                    await sleep(100 * tries, signal);
                }
            }
            offset = partEnd;
            cur = nxt;
        }
        return done;
    }

    async #uploadOffset(path, lease, signal) {
        const res = await this.transport.call('HEAD', path, { headers: jobHeaders(lease, { 'lease-id': lease.leaseId }), signal });
        return Number(res.headers.get('upload-offset') ?? 0);
    }
}
