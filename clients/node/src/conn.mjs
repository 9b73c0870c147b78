// conn.mjs - Connection, one keep-alive HTTP/1.1 socket of a worker loop, with a fetch-shaped call (conn.fetch)
// for the loop's own requests: the parked lease, then each report carrying the next lease. A loop sends one
// request at a time, so the socket needs no pool, and its answers are small JSON documents: the request goes
// out in one write and the answer is parsed from the socket's bytes here (Content-Length or chunked), without
// node:http's request and message streams, which cost a worker about as much CPU as the daemon spends on the
// job. A request that finds its reused socket closed by the daemon (an idle keep-alive ended) before any byte
// of an answer came is sent once more on a new socket. Anything else a worker sends (heartbeats, artifact
// uploads) goes through the Transport's node:http path.

import net from 'node:net';
import tls from 'node:tls';

const CRLF2 = Buffer.from('\r\n\r\n');

/** The get/has of fetch's Headers over a parsed header object (names in lower case). */
class Headers {
    constructor(h) {
        this.h = h;
    }

    get(name) {
        const v = this.h[name.toLowerCase()];
        return v === undefined ? null : v;
    }

    has(name) {
        return this.h[name.toLowerCase()] !== undefined;
    }
}

/** An answer read whole: the members of a fetch Response that Transport uses. */
class Answer {
    constructor(status, statusText, headers, body) {
        this.status = status;
        this.statusText = statusText;
        this.ok = status >= 200 && status < 300;
        this.headers = new Headers(headers);
        this.buf = body;
    }

    async text() {
        return this.buf.toString('utf8');
    }

    async json() {
        return JSON.parse(this.buf.toString('utf8'));
    }

    async arrayBuffer() {
        const b = this.buf;
        return b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
    }

    get body() {
        const b = this.buf;
        return new ReadableStream({
            start(c) {
                if (b.length) c.enqueue(new Uint8Array(b));
                c.close();
            },
        });
    }
}

/**
 * Parse one answer from the front of buf (HEAD: none has a body). Returns {answer, rest} once it is whole,
 * null while more bytes are needed, {close: true} for an answer whose end is the socket's close.
 */
function parse(buf, head, closed) {
    const end = buf.indexOf(CRLF2);
    if (end < 0) return null;
    const lines = buf.toString('latin1', 0, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(lines[0]);
    if (!m) throw new Error(`acceptd: bad status line ${JSON.stringify(lines[0].slice(0, 80))}`);
    const status = Number(m[1]);
    const h = {};
    for (let i = 1; i < lines.length; i++) {
        const c = lines[i].indexOf(':');
        if (c <= 0) continue;
        const name = lines[i].slice(0, c).trim().toLowerCase();
        const v = lines[i].slice(c + 1).trim();
        h[name] = h[name] === undefined ? v : `${h[name]}, ${v}`;
    }
    if (status < 200) return parse(buf.subarray(end + 4), head, closed); // 1xx: the answer follows
    let at = end + 4;
    const keep = !/\bclose\b/i.test(h.connection ?? '');
    if (head || status === 204 || status === 304) return { answer: new Answer(status, m[2], h, Buffer.alloc(0)), rest: buf.subarray(at), keep };
    if (/chunked/i.test(h['transfer-encoding'] ?? '')) {
        const parts = [];
        for (;;) {
            const le = buf.indexOf('\r\n', at);
            if (le < 0) return null;
            const size = parseInt(buf.toString('latin1', at, le), 16);
            if (Number.isNaN(size)) throw new Error('acceptd: bad chunk size');
            if (size === 0) {
                const te = buf.indexOf(CRLF2, le); // the size line's end, any trailers, the blank line
                if (te < 0) return null;
                return { answer: new Answer(status, m[2], h, Buffer.concat(parts)), rest: buf.subarray(te + 4), keep };
            }
            if (buf.length < le + 2 + size + 2) return null;
            parts.push(buf.subarray(le + 2, le + 2 + size));
            at = le + 2 + size + 2;
        }
    }
    if (h['content-length'] !== undefined) {
        const n = Number(h['content-length']);
        if (buf.length < at + n) return null;
        return { answer: new Answer(status, m[2], h, buf.subarray(at, at + n)), rest: buf.subarray(at + n), keep };
    }
    if (!closed) return null; // the body ends with the connection
    return { answer: new Answer(status, m[2], h, buf.subarray(at)), rest: Buffer.alloc(0), keep: false };
}

/** One keep-alive connection to base (http: or https:); fetch(url, init) sends one request at a time. */
export class Connection {
    constructor(base) {
        const u = new URL(base);
        this.secure = u.protocol === 'https:';
        this.host = u.hostname.replace(/^\[|\]$/g, '');
        this.port = Number(u.port) || (this.secure ? 443 : 80);
        this.hostHeader = u.host;
        this.origin = u.origin;
        this.socket = null;
        this.busy = false;
        this.fetch = this.fetch.bind(this);
    }

    close() {
        this.socket?.destroy();
        this.socket = null;
    }

    #connect() {
        const s = this.secure ? tls.connect({ host: this.host, port: this.port, servername: this.host }) : net.connect({ host: this.host, port: this.port });
        s.setNoDelay(true);
        s.on('error', () => {}); // reported through the request in flight (its close)
        s.on('close', () => {
            if (this.socket === s) this.socket = null; // closed while idle: the next request connects anew
        });
        return s;
    }

    async fetch(url, init = {}) {
        if (this.busy) throw new Error('acceptd: Connection is sending one request at a time');
        this.busy = true;
        try {
            // The target: the path of a URL on this connection's origin (no URL parse for those), else parsed.
            let target;
            if (typeof url === 'string' && url.startsWith(this.origin) && url[this.origin.length] === '/') target = url.slice(this.origin.length);
            else {
                const u = typeof url === 'string' ? new URL(url) : url;
                target = u.pathname + u.search;
            }
            const method = init.method ?? 'GET';
            const body = init.body ?? null;
            let head = `${method} ${target} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
            const h = init.headers ?? {};
            for (const k in h) head += `${k}: ${h[k]}\r\n`;
            // A JSON body (a string) goes out in the same string as the head: one write, no copy into a Buffer here.
            let wire;
            if (body == null) wire = `${head}\r\n`;
            else if (typeof body === 'string') wire = `${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
            else wire = Buffer.concat([Buffer.from(`${head}content-length: ${body.length}\r\n\r\n`, 'latin1'), body]);
            for (let attempt = 0; ; attempt++) {
                const reused = this.socket !== null;
                if (!this.socket) this.socket = this.#connect();
                try {
                    return await this.#exchange(this.socket, wire, method === 'HEAD', init.signal);
                } catch (e) {
                    this.close();
                    if (!(e.stale && reused && attempt === 0)) throw e.cause ?? e;
                }
            }
        } finally {
            this.busy = false;
        }
    }

    // Write one request on s and read its answer.
    #exchange(s, wire, head, signal) {
        return new Promise((resolve, reject) => {
            let buf = Buffer.alloc(0);
            let got = false;
            const done = (err, answer, keep) => {
                s.off('data', onData);
                s.off('close', onClose);
                signal?.removeEventListener('abort', onAbort);
                if (err) return reject(err);
                if (!keep) this.close();
                resolve(answer);
            };
            const onData = (chunk) => {
                got = true;
                buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
                try {
                    const r = parse(buf, head, false);
                    if (r) done(null, r.answer, r.keep);
                } catch (e) {
                    done(e);
                }
            };
            const onClose = () => {
                if (got) {
                    try {
                        const r = parse(buf, head, true);
                        if (r) return done(null, r.answer, false);
                    } catch (e) {
                        return done(e);
                    }
                }
                const err = new Error('acceptd: the connection closed before the answer');
                err.stale = !got;
                done(err);
            };
            const onAbort = () => {
                const err = new Error('aborted');
                err.cause = signal.reason;
                done(err);
            };
            if (signal?.aborted) return onAbort();
            signal?.addEventListener('abort', onAbort, { once: true });
            s.on('data', onData);
            s.on('close', onClose);
            s.write(wire);
        });
    }
}
