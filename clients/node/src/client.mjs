// client.mjs - the submitting side: Client (submit, get, list, cancel, retry, result) and Job, a handle on one
// job whose wait() follows it to its end. wait() reads the job's Server-Sent Events stream and resumes it with
// Last-Event-ID when it breaks; when the stream cannot be had at all (a proxy that refuses or buffers
// text/event-stream answers with a 4xx/5xx) it polls GET /v1/jobs/{id} instead, with If-None-Match, at the
// pace the daemon's Retry-After asks. An artifact's download that breaks is resumed with a Range request
// (If-Range: its ETag) from the byte where it broke, and its bytes are checked against its Repr-Digest at the
// end. Errors are ProblemErrors (http.mjs). Batches and schedules are in batches.mjs.

import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { ProblemError, Transport, problemOf, retryAfterSeconds, sleep } from './http.mjs';
import { Batch, Schedules } from './batches.mjs';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'partialSuccess']);
const enc = encodeURIComponent;

/** True for a job status that will not change again. */
export function isTerminal(status) {
    return TERMINAL.has(status);
}

/** An abort signal for {signal, timeout (ms)}; timeouts reject with a DOMException named TimeoutError. */
export function combine(signal, timeout) {
    const list = [];
    if (signal) list.push(signal);
    if (timeout != null) list.push(AbortSignal.timeout(timeout));
    if (list.length === 0) return undefined;
    return list.length === 1 ? list[0] : AbortSignal.any(list);
}

/** The bytes of a Response's body: node:http's message itself when it is one (no web stream in between). */
function bytesOf(res) {
    return res.msg ?? res.body ?? [];
}

/**
 * The bytes of a whole artifact's download (res, a 200 answer to GET path), resumed from where they broke
 * with Range: bytes=N- and If-Range: etag (a 206 from N on, up to `resumes` times); the SHA-256 of what was
 * read must be the answer's Repr-Digest, or the stream ends in an error. stats.resumed counts the resumes.
 */
async function* resumableBytes(transport, path, res, { signal, resumes = 5, stats }) {
    const etag = res.headers.get('etag');
    const digest = res.headers.get('repr-digest');
    const len = res.headers.get('content-length');
    const size = len == null ? null : Number(len);
    const h = createHash('sha256');
    let got = 0;
    for (let n = 0; ; ) {
        try {
            for await (const c of bytesOf(res)) {
                got += c.length;
                h.update(c);
                yield c;
            }
            if (size == null || got >= size) break;
            throw new Error(`acceptd: the artifact's download ended at byte ${got} of ${size}`);
        } catch (e) {
            if (signal?.aborted || !etag || size == null || n++ >= resumes) throw e;
            await sleep(100 * n, signal);
            res = await transport.call('GET', path, { signal, headers: { range: `bytes=${got}-`, 'if-range': etag } });
            const cr = res.headers.get('content-range') ?? '';
            if (res.status !== 206 || !cr.startsWith(`bytes ${got}-`)) {
                await res.body?.cancel?.().catch(() => {});
                throw new Error(`acceptd: cannot resume the artifact's download at byte ${got} (HTTP ${res.status} ${cr}): ${e.message}`);
            }
            if (stats) stats.resumed++;
        }
    }
    const want = `sha-256=:${h.digest('base64')}:`;
    if (digest && /^sha-256=/.test(digest) && digest !== want) throw new Error(`acceptd: the artifact's digest is ${want}, not the announced ${digest}`);
}

/** Split an SSE byte stream into events {event, data, id}; calls onRetry(ms) for `retry:` lines. */
export async function* sseEvents(body, onRetry) {
    const dec = new TextDecoder();
    let buf = '';
    let ev = { event: 'message', data: [], id: null };
    for await (const chunk of body) {
        buf += dec.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
            if (line === '') {
                if (ev.data.length > 0) yield { event: ev.event, data: ev.data.join('\n'), id: ev.id };
                ev = { event: 'message', data: [], id: null };
                continue;
            }
            if (line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const field = c < 0 ? line : line.slice(0, c);
            let value = c < 0 ? '' : line.slice(c + 1);
            if (value.startsWith(' ')) value = value.slice(1);
            if (field === 'event') ev.event = value;
            else if (field === 'data') ev.data.push(value);
            else if (field === 'id') ev.id = value;
            else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value));
        }
    }
}

/** A handle on one job. data is its latest representation as the daemon answered it. */
export class Job {
    constructor(client, data) {
        this.client = client;
        this.data = data;
        this.id = data.id;
        this.lastEventId = null;
        this.etag = null;
        /** How the last wait() followed the job: 'sse' or 'poll'. */
        this.followedBy = null;
    }

    get status() {
        return this.data.status;
    }

    /** GET the job again; updates data. */
    async get({ signal } = {}) {
        this.data = await this.client.get(this.id, { signal });
        return this.data;
    }

    async cancel(opts) {
        this.data = await this.client.cancel(this.id, opts);
        return this.data;
    }

    retry(opts) {
        return this.client.retry(this.id, opts);
    }

    result(opts) {
        return this.client.result(this.id, opts);
    }

    /**
     * Follow the job until it is final; resolves its final representation. onProgress(data, {event, id}) gets
     * each status and progress change (data: {id, status, progress, message, lastUpdatedAt}; event: the SSE
     * event's name, `status` or `progress`, or `poll`; id: its event id, null when polling). signal/timeout (ms) abort the wait
     * (not the job). sse: false polls from the start.
     */
    async wait({ signal, timeout, onProgress, sse = true } = {}) {
        const sig = combine(signal, timeout);
        if (isTerminal(this.data.status)) return this.data;
        if (sse) {
            const done = await this.#followEvents(sig, onProgress);
            if (done) {
                this.followedBy = 'sse';
                return done;
            }
        }
        this.followedBy = 'poll';
        return this.#poll(sig, onProgress);
    }

    #followEvents(signal, onProgress) {
        return followEvents(this, `/v1/jobs/${enc(this.id)}/events`, signal, (ev, data) => {
            if (ev.event === 'status' || ev.event === 'progress') {
                Object.assign(this.data, data);
                onProgress?.(data, { event: ev.event, id: ev.id });
            }
        });
    }

    #poll(signal, onProgress) {
        return pollUntilDone(this, `/v1/jobs/${enc(this.id)}`, signal, onProgress, (d) => [
            `${d.status}/${d.progress}/${d.message}`,
            { id: d.id, status: d.status, progress: d.progress, message: d.message, lastUpdatedAt: d.lastUpdatedAt },
        ]);
    }
}

// The loops Job.wait and Batch.wait share (h: the job or batch; it keeps data, etag and lastEventId).
// SSE: resolves the final representation, or null when the stream cannot be had (then the caller polls);
// onEvent(ev, data) takes each event before `done`.
export async function followEvents(h, path, signal, onEvent) {
    let retryMs = 2000;
    let failures = 0;
    for (;;) {
        let res;
        try {
            const headers = { accept: 'text/event-stream' };
            if (h.lastEventId != null) headers['last-event-id'] = h.lastEventId;
            res = await h.client.transport.call('GET', path, { headers, signal, ok: [404, 408, 429, 500, 502, 503, 504] });
        } catch (e) {
            if (signal?.aborted) throw signal.reason;
            if (e instanceof ProblemError) throw e; // 401, 403, 410, 400: polling would say the same
            if (++failures > 3) return null;
            await sleep(retryMs, signal);
            continue;
        }
        if (res.status === 204) return h.get({ signal }); // already past `done`
        const ctype = res.headers.get('content-type') ?? '';
        if (res.status !== 200 || !ctype.startsWith('text/event-stream')) {
            await res.body?.cancel().catch(() => {});
            return null;
        }
        try {
            for await (const ev of sseEvents(res.body, (ms) => (retryMs = ms))) {
                if (ev.id != null) h.lastEventId = ev.id;
                failures = 0;
                const data = JSON.parse(ev.data);
                if (ev.event === 'done') {
                    h.data = data;
                    await res.body.cancel().catch(() => {});
                    return data;
                }
                onEvent(ev, data);
            }
        } catch (e) {
            if (signal?.aborted) throw signal.reason;
            if (e instanceof SyntaxError) throw e;
        }
        // The stream ended before `done` (a restart, a proxy's timeout, an overload answer): resume.
        if (++failures > 5) return null;
        await sleep(retryMs, signal);
    }
}

// Poll path with If-None-Match at the Retry-After pace until final; seen(d) answers [what a change is, what
// onProgress gets].
export async function pollUntilDone(h, path, signal, onProgress, seen) {
    let last = null;
    for (;;) {
        const headers = h.etag ? { 'if-none-match': h.etag } : {};
        const res = await h.client.transport.call('GET', path, { headers, signal });
        if (res.status !== 304) {
            h.data = await res.json();
            h.etag = res.headers.get('etag');
        } else {
            await res.body?.cancel().catch(() => {});
        }
        const d = h.data;
        if (isTerminal(d.status)) return d;
        const [key, report] = seen(d);
        if (key !== last) {
            last = key;
            onProgress?.(report, { event: 'poll', id: null });
        }
        const s = retryAfterSeconds(res.headers) ?? 1;
        await sleep(Math.max(0.05, s) * 1000, signal);
    }
}

/** The submitting side of acceptd: new Client('http://127.0.0.1:8080', key). */
export class Client {
    constructor(url, key, options = {}) {
        this.transport = new Transport(url, key, options);
        /** /v1/schedules: create, get, list, update, delete, trigger. */
        this.schedules = new Schedules(this);
    }

    /** A handle on a batch known by id (nothing is fetched). */
    batch(id) {
        return new Batch(this, { id, status: undefined });
    }

    /**
     * Submit up to 1,000 jobs as one batch (POST /v1/batches: all stored in one commit, or none: a 422 whose
     * errors point into /jobs/N). jobs: [{type, payload, ...submit members}]; callbackUrl hears the batch's end.
     * Resolves a Batch.
     */
    async submitBatch(jobs, { callbackUrl, signal } = {}) {
        const json = callbackUrl ? { jobs, callbackUrl } : { jobs };
        const { res, body } = await this.transport.json('POST', '/v1/batches', { json, signal });
        const batch = new Batch(this, body);
        batch.etag = res.headers.get('etag');
        return batch;
    }

    /** A handle on a job known by id (nothing is fetched). */
    job(id) {
        return new Job(this, { id, status: undefined });
    }

    /**
     * Submit a job; resolves a Job. options: any member of a submit's body (priority, runAt, maxAttempts,
     * timeoutSeconds, callbackUrl, uniqueKey, debounceSeconds, group), idempotencyKey (default: a new UUID, so
     * that a retried submit never makes two jobs; false for none), traceparent and tracestate (the caller's
     * W3C trace context, which the job then continues: docs/tracing.md), signal.
     */
    async submit(type, payload = {}, options = {}) {
        const { idempotencyKey = randomUUID(), signal, traceparent, tracestate, ...rest } = options;
        const headers = {};
        if (traceparent) headers.traceparent = traceparent;
        if (traceparent && tracestate) headers.tracestate = tracestate;
        if (idempotencyKey !== false && idempotencyKey != null) headers['idempotency-key'] = JSON.stringify(String(idempotencyKey));
        // With a key, a submit whose answer was lost (a reset connection, a 5xx) is sent again: the key makes
        // the daemon answer the first job rather than make a second; 409 idempotency-key-in-flight means the
        // first is still being committed.
        let res;
        let body;
        for (let tries = 0; ; tries++) {
            try {
                ({ res, body } = await this.transport.json('POST', '/v1/jobs', { json: { ...rest, type, payload }, headers, signal }));
                break;
            } catch (e) {
                const again = !('idempotency-key' in headers) || tries >= 3 || signal?.aborted ? false : e instanceof ProblemError ? e.status >= 500 || e.code === 'idempotency-key-in-flight' : true;
                if (!again) throw e;
                await sleep(250 * (tries + 1), signal);
            }
        }
        const job = new Job(this, body);
        job.etag = res.headers.get('etag');
        job.idempotencyKey = idempotencyKey === false ? null : String(idempotencyKey);
        job.replayed = res.headers.get('idempotent-replayed') === 'true';
        return job;
    }

    async get(id, { signal } = {}) {
        return (await this.transport.json('GET', `/v1/jobs/${enc(id)}`, { signal })).body;
    }

    /** Every job matching {status, type, updatedAfter}, newest first, fetched `limit` (default 100) a page. */
    async *list({ status, type, updatedAfter, limit = 100, signal } = {}) {
        let token = null;
        do {
            const q = new URLSearchParams();
            if (status) q.set('status', status);
            if (type) q.set('type', type);
            if (updatedAfter) q.set('updatedAfter', updatedAfter);
            q.set('limit', String(limit));
            if (token) q.set('pageToken', token);
            const { body } = await this.transport.json('GET', `/v1/jobs?${q}`, { signal });
            for (const item of body.items) yield item;
            token = body.nextPageToken;
        } while (token);
    }

    /** Cancel: a queued job ends at once, a running one gets its cancel request. Resolves the job. */
    async cancel(id, { signal } = {}) {
        return (await this.transport.json('POST', `/v1/jobs/${enc(id)}:cancel`, { signal })).body;
    }

    /** Retry a failed or cancelled job: resolves the new Job. */
    async retry(id, { signal } = {}) {
        const { body } = await this.transport.json('POST', `/v1/jobs/${enc(id)}:retry`, { signal });
        return new Job(this, body);
    }

    /**
     * The job's result. A JSON result resolves the document; an artifact resolves {contentType, size, digest,
     * etag, resumed, body} with body a web ReadableStream (a whole artifact's download resumes with a Range
     * request where it breaks, counted in resumed, and errors at its end unless its digest is the announced one) (stream: true asks for that shape whatever the result is, and
     * nodeStream: true gives body as a Node Readable). A failed job throws its stored problem; a cancelled one
     * 409 job-cancelled; a pending one 404 result-not-ready.
     */
    async result(id, { signal, stream = false, nodeStream = false, range } = {}) {
        const headers = range ? { range } : {};
        const res = await this.transport.call('GET', `/v1/jobs/${enc(id)}/result`, { signal, headers });
        const artifact = res.headers.has('repr-digest') && res.headers.get('accept-ranges') === 'bytes';
        if (!artifact && !stream) {
            const text = await res.text();
            return text ? JSON.parse(text) : null;
        }
        const len = res.headers.get('content-length');
        const out = {
            status: res.status,
            contentType: res.headers.get('content-type'),
            size: len == null ? null : Number(len),
            digest: res.headers.get('repr-digest'),
            etag: res.headers.get('etag'),
            resumed: 0,
        };
        if (artifact && res.status === 200) {
            // The whole artifact: resumed where it breaks, its digest checked at the end.
            const bytes = Readable.from(resumableBytes(this.transport, `/v1/jobs/${enc(id)}/result`, res, { signal, stats: out }), { objectMode: false });
            out.body = nodeStream ? bytes : Readable.toWeb(bytes);
        } else out.body = nodeStream ? Readable.fromWeb(res.body) : res.body;
        return out;
    }
}

export { problemOf };
