// batches.mjs - batches and schedules on the Client (docs/protocol.md: Batches, Schedules; CONTRACT §12, §13).
// A Batch is a handle on up to 1,000 jobs followed as one operation: wait() reads the batch's Server-Sent Events
// stream (a `batch` event per change, then `done`), resuming it with Last-Event-ID when it breaks, and when the
// stream cannot be had at all polls GET /v1/batches/{id} with If-None-Match at the pace of its Retry-After, as
// Job.wait does for a job. Schedules is a thin wrapper over /v1/schedules: create, get, list (an async iterator
// over pages), update (a merge patch), delete and trigger.

import { combine, followEvents, isTerminal, pollUntilDone } from './client.mjs';

const enc = encodeURIComponent;

/** A handle on one batch. data is its latest representation {id, status, total, counts, progress, ...}. */
export class Batch {
    constructor(client, data) {
        this.client = client;
        this.data = data;
        this.id = data.id;
        this.lastEventId = null;
        this.etag = null;
        /** How the last wait() followed the batch: 'sse' or 'poll'. */
        this.followedBy = null;
    }

    get status() {
        return this.data.status;
    }

    get path() {
        return `/v1/batches/${enc(this.id)}`;
    }

    /** GET the batch again; updates data. */
    async get({ signal } = {}) {
        const { res, body } = await this.client.transport.json('GET', this.path, { signal });
        this.data = body;
        this.etag = res.headers.get('etag');
        return body;
    }

    /** Cancel every job of the batch that is not final; resolves the batch as it is after. */
    async cancel({ signal } = {}) {
        this.data = (await this.client.transport.json('POST', `${this.path}:cancel`, { signal })).body;
        return this.data;
    }

    /** The batch's jobs, newest first, fetched `limit` (default 100) a page. */
    async *jobs({ limit = 100, signal } = {}) {
        let token = null;
        do {
            const q = new URLSearchParams({ limit: String(limit) });
            if (token) q.set('pageToken', token);
            const { body } = await this.client.transport.json('GET', `${this.path}/jobs?${q}`, { signal });
            for (const item of body.items) yield item;
            token = body.nextPageToken;
        } while (token);
    }

    /**
     * Follow the batch until it ends; resolves its final representation. onProgress(data, {event, id}) gets
     * each change (event: `batch` from the stream, or `poll`; id: the event id, the number of its jobs ended).
     * signal/timeout (ms) abort the wait, not the batch; sse: false polls from the start.
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
        return followEvents(this, `${this.path}/events`, signal, (ev, data) => {
            if (ev.event === 'batch') {
                this.data = data;
                onProgress?.(data, { event: ev.event, id: ev.id });
            }
        });
    }

    #poll(signal, onProgress) {
        return pollUntilDone(this, this.path, signal, onProgress, (d) => [JSON.stringify(d.counts), d]);
    }
}

/** client.schedules: /v1/schedules (CONTRACT §12). Each call resolves the schedule as the daemon answers it. */
export class Schedules {
    constructor(client) {
        this.client = client;
    }

    #path(id) {
        return `/v1/schedules/${enc(id)}`;
    }

    /** Create a schedule: {id?, cron | every, timezone?, job: {type, payload, ...}, overlap?, ...}. */
    async create(definition, { signal } = {}) {
        return (await this.client.transport.json('POST', '/v1/schedules', { json: definition, signal })).body;
    }

    async get(id, { signal } = {}) {
        return (await this.client.transport.json('GET', this.#path(id), { signal })).body;
    }

    /** Every schedule of the tenant, fetched `limit` (default 100) a page. */
    async *list({ limit = 100, signal } = {}) {
        let token = null;
        do {
            const q = new URLSearchParams({ limit: String(limit) });
            if (token) q.set('pageToken', token);
            const { body } = await this.client.transport.json('GET', `/v1/schedules?${q}`, { signal });
            for (const item of body.items) yield item;
            token = body.nextPageToken;
        } while (token);
    }

    /** Change a schedule with a JSON merge patch (a member set to null goes back to its default). */
    async update(id, patch, { signal } = {}) {
        const body = JSON.stringify(patch);
        const { body: out } = await this.client.transport.json('PATCH', this.#path(id), { body, headers: { 'content-type': 'application/merge-patch+json' }, signal });
        return out;
    }

    async delete(id, { signal } = {}) {
        const res = await this.client.transport.call('DELETE', this.#path(id), { signal });
        await res.body?.cancel().catch(() => {});
    }

    /** One run now, under the schedule's overlap policy; resolves the schedule after the run. */
    async trigger(id, { signal } = {}) {
        return (await this.client.transport.json('POST', `${this.#path(id)}:trigger`, { signal })).body;
    }
}
