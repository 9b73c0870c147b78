// Answers sent before the client has sent its whole body, then the connection closed: a 413 for a body over the
// limit (known from Content-Length, or once a chunked body grows past it), a 417, a 400 for ambiguous framing.
// The daemon reads and discards what keeps coming for a while before it closes (a lingering close, as nginx
// does), so that a client still writing its body reads the answer instead of failing with EPIPE or ECONNRESET
// when the kernel resets a connection closed with unread bytes.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';

import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { PROBLEM_BASE } from './lib/jobs.mjs';

const BODY_BYTES = 20 << 20; // 20 MiB; the daemon's limit here is 4096 bytes
const CHUNK = Buffer.alloc(64 * 1024, 0x20);
const ANSWER_LIMIT_MS = 30_000;

/*
 * POST BODY_BYTES to /v1/jobs with Node's http module, written in 64 KiB pieces as fast as the socket takes
 * them, and resolve {status, headers, body} once the answer has been read. The socket is read only once the
 * whole body has been written, as a client that sends first and reads after does: whether the answer is read
 * before a reset then depends on the daemon alone, not on how the two processes happen to be scheduled. An
 * error of the request before an answer (EPIPE, ECONNRESET) rejects.
 */
function bigPost(d, key, headers) {
    const { hostname, port } = new URL(d.url);
    return new Promise((resolve, reject) => {
        let answered = false;
        let sent = 0;
        const req = http.request({
            host: hostname,
            port: Number(port),
            method: 'POST',
            path: '/v1/jobs',
            agent: false,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
        });
        req.on('socket', (sock) => sock.pause());
        const timer = setTimeout(() => {
            req.destroy();
            reject(new Error(`no answer within ${ANSWER_LIMIT_MS} ms`));
        }, ANSWER_LIMIT_MS);
        req.on('response', (res) => {
            answered = true;
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => {
                clearTimeout(timer);
                req.destroy();
                resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
            });
            res.on('error', (e) => {
                clearTimeout(timer);
                reject(new Error(`the answer broke off: ${e.code ?? e.message}`));
            });
        });
        req.on('error', (e) => {
            if (answered) return;
            clearTimeout(timer);
            reject(new Error(`${e.code ?? e.message} after ${sent} bytes written, before any answer`));
        });
        const pump = () => {
            while (sent < BODY_BYTES && !req.destroyed) {
                sent += CHUNK.length;
                if (!req.write(CHUNK)) {
                    req.once('drain', pump);
                    return;
                }
            }
            if (!req.destroyed) req.end(() => req.socket?.resume());
        };
        pump();
    });
}

function postHead(key, lines) {
    return (
        `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`
    );
}

/*
 * A client that writes its whole request before it reads anything (as many do): head, then piece repeated up to
 * BODY_BYTES, then tail, on a raw connection, and only then the answer. Resolves {status, headers, body}; a
 * write that fails (the daemon reset the connection) rejects.
 */
function writeAllThenRead(d, head, piece, tail = Buffer.alloc(0)) {
    const { hostname, port } = new URL(d.url);
    return new Promise((resolve, reject) => {
        const sock = net.connect(Number(port), hostname);
        sock.pause();
        const chunks = [];
        let sent = 0;
        let writing = true;
        const timer = setTimeout(() => {
            sock.destroy();
            reject(new Error(`no answer within ${ANSWER_LIMIT_MS} ms`));
        }, ANSWER_LIMIT_MS);
        const done = (err, res) => {
            clearTimeout(timer);
            sock.destroy();
            if (err) reject(err);
            else resolve(res);
        };
        sock.on('error', (e) =>
            done(new Error(`${e.code ?? e.message} after ${sent} body bytes written${writing ? ', before reading the answer' : ''}`)),
        );
        sock.on('data', (c) => {
            chunks.push(c);
            const a = Buffer.concat(chunks).toString('latin1');
            const end = a.indexOf('\r\n\r\n');
            const len = Number(/\r\ncontent-length: *(\d+)/i.exec(a)?.[1] ?? -1);
            if (end < 0 || len < 0 || a.length < end + 4 + len) return;
            const headers = {};
            for (const line of a.slice(0, end).split('\r\n').slice(1)) {
                const i = line.indexOf(':');
                headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
            }
            done(null, { status: Number(a.slice(9, 12)), headers, body: Buffer.from(a.slice(end + 4, end + 4 + len), 'latin1').toString('utf8') });
        });
        sock.on('end', () => done(new Error(`closed after ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 300))}`)));
        const pump = () => {
            while (sent < BODY_BYTES) {
                sent += piece.length;
                if (!sock.write(piece)) {
                    sock.once('drain', pump);
                    return;
                }
            }
            sock.write(tail, () => {
                writing = false;
                sock.resume();
            });
        };
        sock.write(head);
        pump();
    });
}

function assertProblemBody(res, status, code) {
    assert.equal(res.status, status, res.body);
    assert.match(res.headers['content-type'] ?? '', /^application\/problem\+json/, res.body);
    const p = JSON.parse(res.body);
    assert.equal(p.status, status, res.body);
    assert.equal(p.code, code, res.body);
    assert.equal(p.type, PROBLEM_BASE + code, res.body);
    return p;
}

describe('answers sent before the body was read', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('a 20 MiB POST with Content-Length from Node http gets the 413 problem, not a broken pipe', async () => {
        const { keys } = tenant(d);
        const res = await bigPost(d, keys.c, { 'content-length': String(BODY_BYTES) });
        const p = assertProblemBody(res, 413, 'payload-too-large');
        assert.match(p.detail, /4096/);
        assert.equal(res.headers.connection, 'close');
    });

    it('a chunked 20 MiB POST, written whole before the answer is read, gets the 413 once the body passes the limit', async () => {
        const { keys } = tenant(d);
        const piece = Buffer.concat([Buffer.from(`${CHUNK.length.toString(16)}\r\n`), CHUNK, Buffer.from('\r\n')]);
        const res = await writeAllThenRead(d, postHead(keys.c, ['Transfer-Encoding: chunked']), piece, Buffer.from('0\r\n\r\n'));
        assertProblemBody(res, 413, 'payload-too-large');
    });

    it('a 20 MiB POST with an expectation the daemon does not know gets its 417, sent before the body', async () => {
        const { keys } = tenant(d);
        const res = await writeAllThenRead(d, postHead(keys.c, [`Content-Length: ${BODY_BYTES}`, 'Expect: x-unknown']), CHUNK);
        assertProblemBody(res, 417, 'invalid-request');
    });

    it('a request refused for its ambiguous framing with 20 MiB still to come gets its 400', async () => {
        const { keys } = tenant(d);
        const body = JSON.stringify({ type: 'report.export', payload: {} });
        const head = postHead(keys.c, [`Content-Length: ${body.length}`, `Content-Length: ${body.length + BODY_BYTES}`]) + body;
        const res = await writeAllThenRead(d, head, CHUNK);
        const p = assertProblemBody(res, 400, 'invalid-request');
        assert.match(p.detail, /Content-Length/);
    });
});
