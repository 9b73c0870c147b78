// http.mjs - the one place the library talks HTTP: a bearer key on every request, JSON in and out, and every
// answer of 400 or more turned into a ProblemError built from its RFC 9457 body (application/problem+json), so
// that callers branch on `err.code` or `err.status` rather than on text. Requests go over node:http with a
// keep-alive agent (nodeFetch, a fetch-shaped call) unless the caller hands a fetch of its own.

import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';

const agents = { 'http:': new http.Agent({ keepAlive: true, maxSockets: 256 }), 'https:': new https.Agent({ keepAlive: true, maxSockets: 256 }) };

/** The get/has of fetch's Headers over node:http's parsed header object (names in lower case). */
class NodeHeaders {
    constructor(h) {
        this.h = h;
    }

    get(name) {
        const v = this.h[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
    }

    has(name) {
        return this.h[name.toLowerCase()] !== undefined;
    }
}

/** A small answer over node:http, with the members of a fetch Response the library uses. */
class NodeResponse {
    constructor(msg) {
        this.msg = msg;
        this.status = msg.statusCode;
        this.statusText = msg.statusMessage ?? '';
        this.ok = this.status >= 200 && this.status < 300;
        this.headers = new NodeHeaders(msg.headers);
        this._body = undefined;
        this.bodiless = this.status === 204 || this.status === 304 || msg.req?.method === 'HEAD';
        if (this.bodiless) msg.resume(); // nothing to read: let the connection go back to the agent
    }

    /** The body as a web ReadableStream (null for a bodiless answer). */
    get body() {
        if (this._body === undefined) this._body = this.bodiless ? null : Readable.toWeb(this.msg);
        return this._body;
    }

    async arrayBuffer() {
        const chunks = [];
        for await (const c of this.msg) chunks.push(c);
        const b = Buffer.concat(chunks);
        return b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
    }

    text() {
        return new Promise((resolve, reject) => {
            let s = '';
            this.msg.setEncoding('utf8');
            this.msg.on('data', (c) => (s += c));
            this.msg.on('end', () => resolve(s));
            this.msg.on('error', reject);
        });
    }

    async json() {
        return JSON.parse(await this.text());
    }
}

/**
 * fetch over node:http with a keep-alive agent: what the library uses unless given a fetch of its own. It is
 * the standard library's leanest client (Node's fetch costs several times its CPU per request), and a worker
 * sends two requests a job. init: {method, headers (a plain object), body (string or bytes), signal}.
 */
export function nodeFetch(url, init = {}) {
    const u = typeof url === 'string' ? new URL(url) : url;
    const mod = u.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
        const body = init.body == null ? null : typeof init.body === 'string' ? Buffer.from(init.body) : init.body;
        const headers = { ...init.headers };
        if (body) headers['content-length'] = String(body.length ?? body.byteLength);
        const opts = { protocol: u.protocol, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port, path: u.pathname + u.search, method: init.method ?? 'GET', headers, agent: agents[u.protocol] };
        if (init.signal) opts.signal = init.signal;
        const req = mod.request(opts, (msg) => resolve(new NodeResponse(msg)));
        req.on('error', reject);
        req.end(body ?? undefined);
    });
}

/** An RFC 9457 problem answered by acceptd (or made up from a non-problem error answer). */
export class ProblemError extends Error {
    constructor(problem, { status, headers } = {}) {
        const p = problem && typeof problem === 'object' ? problem : {};
        super(p.detail || p.title || `HTTP ${status ?? p.status}`);
        this.name = 'ProblemError';
        this.problem = p;
        this.status = p.status ?? status;
        this.type = p.type ?? 'about:blank';
        this.code = p.code ?? null;
        this.title = p.title ?? null;
        this.detail = p.detail ?? null;
        this.instance = p.instance ?? null;
        this.errors = Array.isArray(p.errors) ? p.errors : [];
        this.headers = headers ?? null;
        const ra = headers?.get?.('retry-after');
        this.retryAfter = ra != null && /^\d+$/.test(ra) ? Number(ra) : null;
    }
}

/** The ProblemError for an error answer; reads (and so consumes) its body. */
export async function problemOf(res) {
    const text = await res.text().catch(() => '');
    let body = null;
    try {
        body = text ? JSON.parse(text) : null;
    } catch {
        /* not JSON: a proxy's page */
    }
    if (!body || typeof body !== 'object') body = { status: res.status, title: res.statusText || `HTTP ${res.status}`, detail: text.slice(0, 500) || undefined };
    return new ProblemError(body, { status: res.status, headers: res.headers });
}

/** Seconds in a Retry-After field (delta-seconds or an HTTP-date), or null. */
export function retryAfterSeconds(headers) {
    const v = headers.get('retry-after');
    if (v == null) return null;
    if (/^\s*\d+\s*$/.test(v)) return Number(v);
    const t = Date.parse(v);
    return Number.isNaN(t) ? null : Math.max(0, (t - Date.now()) / 1000);
}

/** Resolves after ms, or rejects with signal's reason when it aborts first. */
export function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const t = setTimeout(done, ms);
        function done() {
            signal?.removeEventListener('abort', onAbort);
            resolve();
        }
        function onAbort() {
            clearTimeout(t);
            reject(signal.reason);
        }
        signal?.addEventListener('abort', onAbort, { once: true });
    });
}

/**
 * A transport bound to a base URL and key. call(method, path, {json, body, headers, signal, ok}) resolves the
 * Response when its status is below 400 or listed in ok, and throws a ProblemError otherwise.
 */
export class Transport {
    constructor(url, key, { fetch: f = nodeFetch, userAgent } = {}) {
        if (typeof url !== 'string' || !/^https?:\/\//.test(url)) throw new TypeError('acceptd: url must be an http:// or https:// URL');
        this.base = url.replace(/\/+$/, '');
        this.key = key ?? null;
        this.fetch = f;
        this.userAgent = userAgent ?? 'acceptd-node/0.1.0';
    }

    url(path) {
        return /^https?:\/\//.test(path) ? path : this.base + path;
    }

    async call(method, path, { json, body, headers = {}, signal, ok = [] } = {}) {
        const h = { 'user-agent': this.userAgent, ...headers };
        if (this.key) h.authorization = `Bearer ${this.key}`;
        let payload = body;
        if (json !== undefined) {
            payload = JSON.stringify(json);
            h['content-type'] = 'application/json';
        }
        const init = { method, headers: h, body: payload, signal };
        if (payload && typeof payload.getReader === 'function') init.duplex = 'half';
        const res = await this.fetch(this.url(path), init);
        if (res.status >= 400 && !ok.includes(res.status)) throw await problemOf(res);
        return res;
    }

    /** call() and parse the JSON body (null for an empty one). */
    async json(method, path, opts) {
        const res = await this.call(method, path, opts);
        const text = await res.text();
        return { res, body: text ? JSON.parse(text) : null };
    }
}
