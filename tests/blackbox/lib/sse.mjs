// A small Server-Sent Events client over node:http / node:http2 for the black-box tests: it keeps every
// field the server sent (ids, event names, retry hints, comment lines), which EventSource implementations
// hide. Parsing follows the HTML standard's event-stream rules.

import fs from 'node:fs';
import http from 'node:http';
import { sleep } from './jobs.mjs';
import * as openapi from './openapi.mjs';

/** Incremental event-stream parser: feed(text) -> calls onEvent({id, event, data}), onRetry(ms), onComment(text). */
export function sseParser({ onEvent, onRetry = () => {}, onComment = () => {} }) {
    let buf = '';
    let data = [];
    let event = '';
    let id = null;
    let sawData = false;
    function line(l) {
        if (l === '') {
            if (sawData) onEvent({ id, event: event || 'message', data: data.join('\n') });
            data = [];
            event = '';
            sawData = false;
            return;
        }
        if (l.startsWith(':')) {
            onComment(l.slice(1));
            return;
        }
        const i = l.indexOf(':');
        const field = i < 0 ? l : l.slice(0, i);
        let value = i < 0 ? '' : l.slice(i + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') {
            data.push(value);
            sawData = true;
        } else if (field === 'event') event = value;
        else if (field === 'id') id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value));
    }
    return {
        feed(text) {
            buf += text;
            for (;;) {
                const m = /\r\n|\r|\n/.exec(buf);
                if (!m) break;
                // A lone CR at the very end may be the first half of CRLF: wait for more.
                if (m[0] === '\r' && m.index === buf.length - 1) break;
                line(buf.slice(0, m.index));
                buf = buf.slice(m.index + m[0].length);
            }
        },
    };
}

/** State shared by the http1 and http2 clients: what arrived, and waiting for more. */
function collector() {
    const c = {
        status: 0,
        headers: {},
        events: [],
        retries: [],
        comments: 0,
        raw: '',
        ended: false,
        error: null,
        waiters: new Set(),
    };
    c.parser = sseParser({
        onEvent: (e) => {
            openapi.checkEvent(e);
            c.events.push(e);
            c.wake();
        },
        onRetry: (ms) => {
            c.retries.push(ms);
            c.wake();
        },
        onComment: () => {
            c.comments++;
            c.wake();
        },
    });
    c.wake = () => {
        for (const w of c.waiters) w();
    };
    /** Resolve once pred(c) holds; reject after timeoutMs with what arrived. */
    c.waitFor = (pred, timeoutMs = 10_000, what = 'condition') =>
        new Promise((resolve, reject) => {
            const check = () => {
                if (pred(c)) {
                    c.waiters.delete(check);
                    clearTimeout(t);
                    resolve(c);
                    return true;
                }
                if (c.ended) {
                    c.waiters.delete(check);
                    clearTimeout(t);
                    reject(new Error(`stream ended before ${what}; got ${JSON.stringify(c.events.map((e) => [e.id, e.event]))} status ${c.status} ${c.error ?? ''}`));
                    return true;
                }
                return false;
            };
            const t = setTimeout(() => {
                c.waiters.delete(check);
                reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(c.events.map((e) => [e.id, e.event]))} retries ${c.retries} status ${c.status}`));
            }, timeoutMs);
            if (!check()) c.waiters.add(check);
        });
    c.waitEvents = (n, timeoutMs) => c.waitFor((x) => x.events.length >= n, timeoutMs, `${n} events`);
    c.waitEnd = (timeoutMs = 10_000) => c.waitFor((x) => x.ended, timeoutMs, 'the end of the stream').catch((e) => {
        if (c.ended) return c;
        throw e;
    });
    return c;
}

/** The answer's status and headers, held to docs/openapi.json (lib/openapi.mjs): null or the violation. */
function documented(target, c) {
    return openapi.check({ method: 'GET', target, status: c.status, headers: c.headers, bodyRead: false });
}

/** A body that is not the stream (a problem), once read whole: recorded when the document does not describe it. */
function documentedBody(target, c) {
    if (!/event-stream/i.test(c.headers['content-type'] ?? '') && c.raw.length > 0) {
        openapi.check({ method: 'GET', target, status: c.status, headers: c.headers, text: c.raw });
    }
}

/**
 * GET an event stream over HTTP/1.1 (node:http). url: absolute; headers: extra request headers.
 * Resolves once the response headers arrived: the collector with status, headers, events (live), close().
 */
export function openSse(url, { headers = {}, agent = false } = {}) {
    const c = collector();
    return new Promise((resolve, reject) => {
        const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers }, agent }, (res) => {
            c.status = res.statusCode;
            c.headers = res.headers;
            const target = new URL(url).pathname + new URL(url).search;
            const violation = documented(target, c);
            if (violation) {
                req.destroy();
                reject(new Error(violation));
                return;
            }
            res.setEncoding('utf8');
            res.on('data', (chunk) => {
                c.raw += chunk;
                c.parser.feed(chunk);
            });
            res.on('end', () => {
                documentedBody(target, c);
                c.ended = true;
                c.wake();
            });
            res.on('error', (e) => {
                c.error = e.message;
                c.ended = true;
                c.wake();
            });
            res.on('close', () => {
                c.ended = true;
                c.wake();
            });
            c.res = res;
            resolve(c);
        });
        req.on('error', (e) => {
            if (c.status === 0) reject(e);
            c.error = e.message;
            c.ended = true;
            c.wake();
        });
        c.close = () => req.destroy();
        c.req = req;
    });
}

/** The same over an HTTP/2 session (node:http2 ClientHttp2Session). */
export function openSse2(session, path, { headers = {} } = {}) {
    const c = collector();
    return new Promise((resolve, reject) => {
        const stream = session.request({ ':path': path, accept: 'text/event-stream', ...headers });
        stream.setEncoding('utf8');
        stream.on('response', (h) => {
            c.status = h[':status'];
            c.headers = h;
            const violation = documented(path, c);
            if (violation) {
                stream.close();
                reject(new Error(violation));
                return;
            }
            resolve(c);
        });
        stream.on('data', (chunk) => {
            c.raw += chunk;
            c.parser.feed(chunk);
        });
        stream.on('end', () => {
            documentedBody(path, c);
            c.ended = true;
            c.wake();
        });
        stream.on('close', () => {
            c.ended = true;
            c.wake();
        });
        stream.on('error', (e) => {
            if (c.status === 0) reject(e);
            c.error = e.message;
            c.ended = true;
            c.wake();
        });
        c.close = () => stream.close();
        c.stream = stream;
    });
}

/** Numeric ids of the events of a collector (or a list), in arrival order. */
export const ids = (x) => (x.events ?? x).map((e) => Number(e.id));

/** Poll fn until it returns a truthy value (or throw after timeoutMs). */
export async function eventually(fn, timeoutMs = 5000, what = 'condition') {
    const until = Date.now() + timeoutMs;
    for (;;) {
        const v = await fn();
        if (v) return v;
        if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
        await sleep(25);
    }
}

/** Whether process pid still holds the TCP connection from clientPort to serverPort on 127.0.0.1. */
export function holdsConnection(pid, serverPort, clientPort) {
    const hex = (n) => n.toString(16).toUpperCase().padStart(4, '0');
    const row = fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').map((l) => l.trim().split(/\s+/))
        .find((f) => f[1]?.endsWith(`:${hex(serverPort)}`) && f[2]?.endsWith(`:${hex(clientPort)}`));
    if (!row) return false;
    const want = `socket:[${row[9]}]`;
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
            return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === want;
        } catch {
            return false;
        }
    });
}

/** Decode an HTTP/1.1 chunked body as far as it is complete; ended = the last chunk arrived. */
export function dechunk(buf) {
    let off = 0;
    const parts = [];
    for (;;) {
        const eol = buf.indexOf('\r\n', off);
        if (eol < 0) return { body: Buffer.concat(parts), ended: false };
        const size = parseInt(buf.subarray(off, eol).toString('latin1'), 16);
        if (size === 0) return { body: Buffer.concat(parts), ended: true };
        if (buf.length < eol + 2 + size + 2) return { body: Buffer.concat(parts), ended: false };
        parts.push(buf.subarray(eol + 2, eol + 2 + size));
        off = eol + 2 + size + 2;
    }
}
