// Request smuggling over HTTP/1.1 (RFC 9112 §6.1, §6.3): a request whose body another HTTP parser (a proxy in
// front) may frame otherwise is refused with 400 and its connection closed, so that the bytes behind it are
// never served as a request of their own. Each case sends, on one raw connection, a submit whose framing is
// ambiguous with a second submit (of type email.send) hidden where one reading of the framing puts it; the
// tenant is fresh, so any job it has afterwards was served from those bytes.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { listAll, PROBLEM_BASE } from './lib/jobs.mjs';

const CLOSE_LIMIT_MS = 8_000; // how long a connection the daemon should close is given to close

function submitBody(n) {
    return JSON.stringify({ type: 'report.export', payload: { n } });
}

/* A whole submit of the distinctive type, to be smuggled. */
function smuggled(key) {
    const body = JSON.stringify({ type: 'email.send', payload: { smuggled: true } });
    return (
        `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    );
}

function chunked(body) {
    return `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
}

/* The answers in data: [{status, head, body}] (heads in lower case). */
function parseAnswers(data) {
    const answers = [];
    let buf = data;
    for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = buf.subarray(0, end).toString('latin1').toLowerCase();
        const len = Number(/\r\ncontent-length: *(\d+)/.exec(head)?.[1] ?? 0);
        answers.push({ status: Number(head.slice(9, 12)), head, body: buf.subarray(end + 4, end + 4 + len).toString('utf8') });
        buf = buf.subarray(end + 4 + len);
    }
    return answers;
}

/* Write wire on a fresh connection and never end it: resolves {answers, closed} once the daemon has closed its
 * side (closed: true) or CLOSE_LIMIT_MS have passed (closed: false). */
function exchange(d, wire) {
    const { hostname, port } = new URL(d.url);
    return new Promise((resolve) => {
        const sock = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true });
        const chunks = [];
        let done = false;
        const finish = (closed) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            sock.destroy();
            resolve({ answers: parseAnswers(Buffer.concat(chunks)), closed });
        };
        const timer = setTimeout(() => finish(false), CLOSE_LIMIT_MS);
        sock.on('data', (c) => chunks.push(c));
        sock.on('end', () => finish(true));
        sock.on('error', () => finish(true));
        sock.write(wire);
    });
}

function head(key, lines, version = '1.1') {
    return (
        `POST /v1/jobs HTTP/${version}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`
    );
}

/* The answer must be the one refusal, the connection closed, and nothing served: no job at all. */
async function assertRefused(d, t, wire, detail) {
    const { answers, closed } = await exchange(d, wire);
    const seen = answers.map((a) => `${a.status} ${a.body.slice(0, 200)}`).join(' | ');
    assert.equal(answers.length, 1, `answers: ${seen}`);
    const a = answers[0];
    assert.equal(a.status, 400, seen);
    assert.match(a.head, /\r\ncontent-type: application\/problem\+json/, a.head);
    assert.match(a.head, /\r\nconnection: close/, a.head);
    const p = JSON.parse(a.body);
    assert.equal(p.code, 'invalid-request', a.body);
    assert.equal(p.type, `${PROBLEM_BASE}invalid-request`, a.body);
    assert.match(p.detail, detail, a.body);
    assert.ok(closed, `the daemon kept the connection open after its answer (answers: ${seen})`);
    const jobs = await listAll(t.c);
    assert.deepEqual(
        jobs.map((j) => j.type),
        [],
        'a request was served from the refused bytes',
    );
}

describe('HTTP/1.1 requests with ambiguous framing', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('two different Content-Length fields: 400, closed, and the bytes the longer one covers are never a request', async () => {
        const t = tenant(d);
        const first = submitBody(1);
        const hidden = smuggled(t.keys.c);
        const len = Buffer.byteLength(first);
        const wire = head(t.keys.c, [`Content-Length: ${len}`, `Content-Length: ${len + Buffer.byteLength(hidden)}`]) + first + hidden;
        await assertRefused(d, t, wire, /Content-Length/);
        // The same submit framed one way is served.
        const ok = await exchange(d, head(t.keys.c, [`Content-Length: ${len}`, 'Connection: close']) + first);
        assert.equal(ok.answers[0]?.status, 202, JSON.stringify(ok.answers));
    });

    it('Content-Length with Transfer-Encoding: chunked: 400, closed, and what follows the chunked body is never a request', async () => {
        const t = tenant(d);
        const hidden = smuggled(t.keys.c);
        const body = chunked(submitBody(2));
        const wire = head(t.keys.c, [`Content-Length: ${Buffer.byteLength(body + hidden)}`, 'Transfer-Encoding: chunked']) + body + hidden;
        await assertRefused(d, t, wire, /Content-Length and Transfer-Encoding/);
        // In the other order too.
        const t2 = tenant(d);
        const hidden2 = smuggled(t2.keys.c);
        const wire2 = head(t2.keys.c, ['Transfer-Encoding: chunked', `Content-Length: ${Buffer.byteLength(body + hidden2)}`]) + body + hidden2;
        await assertRefused(d, t2, wire2, /Content-Length and Transfer-Encoding/);
        // A chunked body alone is served.
        const ok = await exchange(d, head(t.keys.c, ['Transfer-Encoding: chunked', 'Connection: close']) + body);
        assert.equal(ok.answers[0]?.status, 202, JSON.stringify(ok.answers));
    });

    it('Transfer-Encoding on HTTP/1.0: 400, closed, and what follows the chunked body is never a request', async () => {
        const t = tenant(d);
        const hidden = smuggled(t.keys.c);
        const wire = head(t.keys.c, ['Connection: keep-alive', 'Transfer-Encoding: chunked'], '1.0') + chunked(submitBody(3)) + hidden;
        await assertRefused(d, t, wire, /HTTP\/1\.0/);
        // HTTP/1.0 with Content-Length is served.
        const first = submitBody(3);
        const ok = await exchange(d, head(t.keys.c, [`Content-Length: ${Buffer.byteLength(first)}`], '1.0') + first);
        assert.equal(ok.answers[0]?.status, 202, JSON.stringify(ok.answers));
    });

    it('the same Content-Length twice, and Transfer-Encoding twice, are refused as well', async () => {
        const t = tenant(d);
        const first = submitBody(4);
        const len = Buffer.byteLength(first);
        await assertRefused(d, t, head(t.keys.c, [`Content-Length: ${len}`, `content-length: ${len}`]) + first, /Content-Length/);
        const hidden = smuggled(t.keys.c);
        const wire = head(t.keys.c, ['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked']) + chunked(first) + hidden;
        await assertRefused(d, t, wire, /Transfer-Encoding/);
    });
});
