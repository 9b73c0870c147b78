// Assertions and small workflows shared by the black-box tests: submit, lease, complete, fail,
// problem checks and the job-shape check. Every helper asserts the status it expects and puts the
// response body in the failure message.

import assert from 'node:assert/strict';

export const PROBLEM_BASE = 'https://acceptd.dev/problems/';
export const JOB_ID = /^job_[A-Za-z0-9_-]{28}$/;
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
export const STRONG_ETAG = /^"[\x21\x23-\x7e\x80-\xff]*"$/;
export const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'partialSuccess'];
export const TERMINAL = ['succeeded', 'failed', 'cancelled', 'partialSuccess'];
export const JOB_FIELDS = [
    'id', 'type', 'status', 'progress', 'priority', 'payload', 'attempt', 'maxAttempts', 'cancelRequested',
    'createdAt', 'startedAt', 'lastUpdatedAt', 'finishedAt', 'expiresAt', 'runAt', 'retryOf', 'message', 'links',
];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Run fn over items with at most n at a time; returns the results in order. */
export async function mapLimit(items, n, fn) {
    const out = new Array(items.length);
    let next = 0;
    await Promise.all(Array.from({ length: n }, async () => {
        while (next < items.length) {
            const i = next++;
            out[i] = await fn(items[i], i);
        }
    }));
    return out;
}


/** A header from a fetch Headers object or a rawRequest() header map. */
export function hget(res, name) {
    if (typeof res.headers.get === 'function') return res.headers.get(name);
    return res.headers[name.toLowerCase()] ?? null;
}

/** One line describing a response, for failure messages. */
export function show(res) {
    const body = (res.text ?? res.body ?? '').slice(0, 600);
    return `${res.method ?? ''} ${res.path ?? ''} -> ${res.status} ${body}`;
}

export function expectStatus(res, status) {
    assert.equal(res.status, status, show(res));
    return res;
}

/**
 * Assert an RFC 9457 problem: content type, every member, status = HTTP status, type = base + code,
 * instance = the request path (with or without the query; a path longer than 512 bytes is cut there; the value
 * of a signed URL's sig reads "redacted").
 * code may be a list of acceptable codes,
 * or null for any code.
 */
export function assertProblem(res, status, code, { instance } = {}) {
    const ctx = show(res);
    assert.equal(res.status, status, ctx);
    assert.match(hget(res, 'content-type') ?? '', /^application\/problem\+json\s*(;|$)/i, ctx);
    const p = res.json;
    assert.ok(p !== null && typeof p === 'object' && !Array.isArray(p), `problem body is not a JSON object: ${ctx}`);
    for (const f of ['type', 'title', 'detail', 'instance', 'code']) {
        assert.equal(typeof p[f], 'string', `problem member "${f}" missing or not a string: ${ctx}`);
    }
    assert.ok(p.title.length > 0, `empty title: ${ctx}`);
    assert.equal(p.status, status, `problem status differs from HTTP status: ${ctx}`);
    if (code !== null) {
        const codes = Array.isArray(code) ? code : [code];
        assert.ok(codes.includes(p.code), `problem code ${JSON.stringify(p.code)} not in ${JSON.stringify(codes)}: ${ctx}`);
    }
    assert.match(p.code, /^[a-z0-9-]+$/, `code is not a short machine string: ${ctx}`);
    assert.equal(p.type, PROBLEM_BASE + p.code, ctx);
    const want = instance ?? res.path?.replace(/([?&])sig=[^&]+/g, '$1sig=redacted');
    if (want !== undefined) {
        const bare = want.split('?')[0];
        const ok = [want, bare].some((w) => p.instance === w || (w.length > 512 && p.instance === w.slice(0, 512)));
        assert.ok(ok, `instance ${JSON.stringify(p.instance)}, want ${JSON.stringify(bare)}: ${ctx}`);
    }
    return p;
}

/** Retry-After: an integer number of seconds, 1..max (the protocol clamps its estimate to 1-30). */
export function assertRetryAfter(res, { max = 30 } = {}) {
    const v = hget(res, 'retry-after');
    assert.ok(v !== null, `no Retry-After: ${show(res)}`);
    assert.match(v, /^\d+$/, `Retry-After is not delta-seconds: ${v}`);
    assert.ok(Number(v) >= 1 && Number(v) <= max, `Retry-After ${v} outside 1..${max}`);
    return Number(v);
}

/** After an outage of the store: what failed, failed with a 503 "unavailable" problem and Retry-After. */
export function assertUnavailable(failures) {
    for (const r of failures) {
        assertProblem(r, 503, 'unavailable');
        assert.match(hget(r, 'retry-after') ?? '', /^[1-9][0-9]*$/, show(r));
    }
}

/** Every job id in accepted (each got a 202) is there, read through the clients in turn (one per node). */
export async function assertAllThere(clients, accepted) {
    const missing = [];
    for (let i = 0; i < accepted.length; i++) {
        const r = await clients[i % clients.length].get(`/v1/jobs/${accepted[i]}`);
        if (r.status !== 200) missing.push(`${accepted[i]}: ${r.status}`);
    }
    assert.deepEqual(missing, [], 'jobs that got a 202 and are not there');
}

export function assertStrongEtag(res) {
    const e = hget(res, 'etag');
    assert.ok(e !== null, `no ETag: ${show(res)}`);
    assert.match(e, STRONG_ETAG, `ETag is not a strong entity tag: ${e}`);
    return e;
}

/** Parse an RFC 8288 Link header into [{target, rel}]. */
export function parseLinks(value) {
    const out = [];
    for (const m of (value ?? '').matchAll(/<([^>]*)>((?:\s*;\s*[^;,]+)*)/g)) {
        const rel = /;\s*rel\s*=\s*"?([^";,]+)"?/i.exec(m[2]);
        out.push({ target: m[1], rel: rel ? rel[1].trim() : null });
    }
    return out;
}

/** Every field of the job representation is present and well-typed; result/error only in their states. */
export function assertJobShape(job) {
    const ctx = JSON.stringify(job);
    assert.ok(job !== null && typeof job === 'object', `job is not an object: ${ctx}`);
    for (const f of JOB_FIELDS) assert.ok(f in job, `job lacks "${f}": ${ctx}`);
    assert.match(job.id, JOB_ID, ctx);
    assert.equal(typeof job.type, 'string', ctx);
    assert.ok(STATUSES.includes(job.status), `status ${job.status}: ${ctx}`);
    assert.ok(job.progress === null || (Number.isInteger(job.progress) && job.progress >= 0 && job.progress <= 100), `progress: ${ctx}`);
    assert.ok(['high', 'normal', 'low'].includes(job.priority), `priority: ${ctx}`);
    assert.ok(job.payload !== null && typeof job.payload === 'object' && !Array.isArray(job.payload), `payload: ${ctx}`);
    assert.ok(Number.isInteger(job.attempt) && job.attempt >= 0, `attempt: ${ctx}`);
    assert.ok(Number.isInteger(job.maxAttempts) && job.maxAttempts >= 1 && job.maxAttempts <= 100, `maxAttempts: ${ctx}`);
    assert.equal(typeof job.cancelRequested, 'boolean', ctx);
    assert.match(job.createdAt, TIMESTAMP, `createdAt: ${ctx}`);
    assert.match(job.lastUpdatedAt, TIMESTAMP, `lastUpdatedAt: ${ctx}`);
    for (const f of ['startedAt', 'finishedAt', 'expiresAt', 'runAt']) {
        assert.ok(job[f] === null || TIMESTAMP.test(job[f]), `${f}: ${ctx}`);
    }
    assert.ok(job.retryOf === null || JOB_ID.test(job.retryOf), `retryOf: ${ctx}`);
    assert.ok(job.message === null || typeof job.message === 'string', `message: ${ctx}`);
    const id = job.id;
    assert.deepEqual(job.links, {
        self: `/v1/jobs/${id}`,
        cancel: `/v1/jobs/${id}:cancel`,
        retry: `/v1/jobs/${id}:retry`,
        events: `/v1/jobs/${id}/events`,
        result: `/v1/jobs/${id}/result`,
    });
    const hasResult = job.status === 'succeeded' || job.status === 'partialSuccess';
    if (!hasResult) assert.ok(!('result' in job), `result present while ${job.status}: ${ctx}`);
    else assert.ok('result' in job || typeof job.resultLocation === 'string' || typeof job.artifact === 'object', `neither result, resultLocation nor artifact: ${ctx}`);
    if (job.status === 'failed') assert.ok(job.error && typeof job.error === 'object', `failed without error: ${ctx}`);
    else assert.ok(!('error' in job), `error present while ${job.status}: ${ctx}`);
    if (TERMINAL.includes(job.status)) {
        assert.match(job.finishedAt ?? '', TIMESTAMP, `terminal job without finishedAt: ${ctx}`);
        assert.match(job.expiresAt ?? '', TIMESTAMP, `terminal job without expiresAt: ${ctx}`);
    } else {
        assert.equal(job.finishedAt, null, ctx);
        assert.equal(job.expiresAt, null, ctx);
    }
}

/** POST a job (default: a report.export with an empty payload) and assert 202. Returns the response. */
export async function submit(c, body = { type: 'report.export', payload: {} }, { path = '/v1/jobs', headers } = {}) {
    const res = await c.req('POST', path, { body, headers });
    return expectStatus(res, 202);
}

/** POST /v1/leases. Returns the raw response (200 or 204). */
export function lease(w, types, { wait = 2, max = 1, leaseSeconds = 30, worker = 'blackbox' } = {}) {
    return w.post('/v1/leases', { types: [].concat(types), max, wait, leaseSeconds, worker });
}

/** Lease exactly one job and return {job, leaseId, leaseExpiresAt}; with expectId, it must be that job. */
export async function leaseOne(w, types, { expectId, ...opts } = {}) {
    const res = expectStatus(await lease(w, types, opts), 200);
    assert.equal(res.json?.leases?.length, 1, show(res));
    const l = res.json.leases[0];
    if (expectId !== undefined) assert.equal(l.job.id, expectId, 'leased a different job');
    return l;
}

export async function heartbeat(w, id, leaseId, extra = {}) {
    return w.post(`/v1/jobs/${id}:heartbeat`, { leaseId, ...extra });
}

/** :complete and assert 200; returns the job. */
export async function complete(w, id, leaseId, extra = { result: { ok: true } }) {
    return expectStatus(await w.post(`/v1/jobs/${id}:complete`, { leaseId, ...extra }), 200).json;
}

/** :fail and assert 200; returns the job. */
export async function fail(w, id, leaseId, { error = { title: 'Boom', status: 500, detail: 'it broke', code: 'boom' }, retryable = true } = {}) {
    return expectStatus(await w.post(`/v1/jobs/${id}:fail`, { leaseId, error, retryable }), 200).json;
}

/** Submit, lease that very job; returns {job (as leased), leaseId, res (the 202)}. */
export async function submitAndLease(c, w, body = { type: 'report.export', payload: {} }, opts = {}) {
    const res = await submit(c, body, opts);
    const l = await leaseOne(w, body.type ?? opts.type, { expectId: res.json.id, leaseSeconds: opts.leaseSeconds ?? 30 });
    return { ...l, res };
}

/** Submit, lease, complete. Returns the final job. */
export async function runToSuccess(c, w, body = { type: 'report.export', payload: {} }, extra = { result: { ok: true } }) {
    const l = await submitAndLease(c, w, body);
    return complete(w, l.job.id, l.leaseId, extra);
}

/** Submit with maxAttempts 1, lease, fail. Returns the final (failed) job. */
export async function runToFailure(c, w, body = { type: 'report.export', payload: {} }, error) {
    const l = await submitAndLease(c, w, { ...body, maxAttempts: 1 });
    const job = await fail(w, l.job.id, l.leaseId, error ? { error, retryable: true } : undefined);
    assert.equal(job.status, 'failed', JSON.stringify(job));
    return job;
}

/** Submit and cancel while queued. Returns the cancelled job. */
export async function runToCancelled(c, body = { type: 'report.export', payload: {} }) {
    const id = (await submit(c, body)).json.id;
    const res = expectStatus(await c.del(`/v1/jobs/${id}`), 200);
    assert.equal(res.json.status, 'cancelled', show(res));
    return res.json;
}

/** GET /v1/jobs/{id}, assert 200, return the job. */
export async function getJob(c, id) {
    return expectStatus(await c.get(`/v1/jobs/${id}`), 200).json;
}

/** Every item of GET /v1/jobs?query, following nextPageToken. */
export async function listAll(c, query = '') {
    const items = [];
    let token = null;
    for (let page = 0; page < 1000; page++) {
        const q = new URLSearchParams(query);
        q.set('limit', '500');
        if (token) q.set('pageToken', token);
        const res = expectStatus(await c.get(`/v1/jobs?${q}`), 200);
        assert.ok(Array.isArray(res.json?.items), show(res));
        items.push(...res.json.items);
        token = res.json.nextPageToken;
        if (token === null || token === undefined) return items;
    }
    throw new Error('listAll: more than 1000 pages');
}

/** Call fn until pred(value) holds or timeoutMs passes; returns the value, fails with the last one. */
export async function waitUntil(fn, pred, { timeoutMs = 10_000, intervalMs = 100, what = 'condition' } = {}) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
        last = await fn();
        if (pred(last)) return last;
        if (Date.now() > deadline) {
            assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${last && last.status !== undefined && last.path ? show(last) : JSON.stringify(last)}`);
        }
        await sleep(intervalMs);
    }
}

/** A random string, for nonces and idempotency keys. */
export function nonce(prefix = 'n') {
    return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}
