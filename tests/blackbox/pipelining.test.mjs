// HTTP/1.1 clients that send more while a request waits for its answer. A durable submit is answered
// only after its commit, and meanwhile the daemon keeps the connection polled without reading it
// (src/http.c, hold_reading): the bytes that follow must stay where they are until the answer has gone,
// then be read and answered in order. The ASan run of this file is what catches a request read over.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { JOB_ID, listAll, sleep } from './lib/jobs.mjs';

function submitWire(key, n) {
    const body = JSON.stringify({ type: 'report.export', payload: { n } });
    return (
        `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    );
}

/* Write wire on one connection and collect `count` answers (status, location, body). wire may be a list:
 * its pieces are then written one at a time, each once every answer before it has come. */
function exchange(d, wire, count, { timeoutMs = 15_000 } = {}) {
    const pieces = Array.isArray(wire) ? [...wire] : [wire];
    const { hostname, port } = new URL(d.url);
    return new Promise((resolve, reject) => {
        const sock = net.connect(Number(port), hostname);
        let buf = Buffer.alloc(0);
        const answers = [];
        const timer = setTimeout(() => {
            sock.destroy();
            reject(new Error(`${answers.length} of ${count} answers within ${timeoutMs} ms`));
        }, timeoutMs);
        sock.on('error', reject);
        sock.on('data', (chunk) => {
            buf = Buffer.concat([buf, chunk]);
            for (;;) {
                const end = buf.indexOf('\r\n\r\n');
                if (end < 0) break;
                const head = buf.subarray(0, end).toString('latin1');
                const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
                if (buf.length < end + 4 + len) break;
                answers.push({
                    status: Number(head.slice(9, 12)),
                    location: /\r\nlocation: *([^\r]*)/i.exec(head)?.[1],
                    body: buf.subarray(end + 4, end + 4 + len).toString('utf8'),
                });
                buf = buf.subarray(end + 4 + len);
            }
            if (answers.length === count) {
                clearTimeout(timer);
                sock.end();
                resolve(answers);
            } else if (pieces.length !== 0) {
                sock.write(pieces.shift());
            }
        });
        sock.write(pieces.shift());
    });
}

describe('HTTP/1.1 pipelining behind answers that wait for a commit', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('100 submits sent in one write (~20 KB, more than the input buffer) are answered in order and all kept', async () => {
        const t = tenant(d);
        let wire = '';
        for (let n = 0; n < 100; n++) wire += submitWire(t.keys.c, n);
        wire += 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
        assert.ok(wire.length > 16384, `only ${wire.length} bytes`);
        const answers = await exchange(d, wire, 101);
        for (let n = 0; n < 100; n++) {
            const a = answers[n];
            assert.equal(a.status, 202, `answer ${n}: ${a.status} ${a.body}`);
            const job = JSON.parse(a.body);
            assert.match(job.id, JOB_ID);
            assert.equal(a.location, `/v1/jobs/${job.id}`);
            assert.deepEqual(job.payload, { n }, `answer ${n} is another request's job`);
        }
        assert.equal(answers[100].status, 200);
        assert.deepEqual(JSON.parse(answers[100].body), { status: 'ok', auth: 'bearer' });
        const kept = await listAll(t.c);
        assert.equal(kept.length, 100);
        assert.deepEqual(new Set(kept.map((j) => j.payload.n)), new Set([...Array(100).keys()]));
    });

    it('submits sent one after another on a keep-alive connection are each answered', async () => {
        const t = tenant(d);
        const answers = await exchange(d, [0, 1, 2, 3, 4].map((n) => submitWire(t.keys.c, n)), 5);
        assert.deepEqual(
            answers.map((a) => [a.status, JSON.parse(a.body).payload.n]),
            [0, 1, 2, 3, 4].map((n) => [202, n]),
        );
    });

    it('a request pipelined behind a long poll is answered after it, on the same connection', async () => {
        const t = tenant(d);
        const job = (await exchange(d, submitWire(t.keys.c, 1), 1))[0];
        const id = JSON.parse(job.body).id;
        const etag = (await t.c.get(`/v1/jobs/${id}`)).headers.get('etag');
        const wire =
            `GET /v1/jobs/${id}?wait=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.keys.c}\r\n` +
            `If-None-Match: ${etag}\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
        const t0 = performance.now();
        const answers = await exchange(d, wire, 2);
        assert.deepEqual(
            answers.map((a) => a.status),
            [304, 200],
        );
        assert.ok(performance.now() - t0 >= 900, 'the long poll did not wait');
    });

    it('the daemon reads nothing more from a connection while its request waits (a flood stays in the kernel)', async () => {
        const t = tenant(d);
        const id = JSON.parse((await exchange(d, submitWire(t.keys.c, 1), 1))[0].body).id;
        const etag = (await t.c.get(`/v1/jobs/${id}`)).headers.get('etag');
        const { hostname, port } = new URL(d.url);
        const sock = net.connect(Number(port), hostname);
        const flood = Buffer.alloc(32 * 1024 * 1024, 'X');
        const handedToKernel = await new Promise((resolve, reject) => {
            sock.on('error', () => {});
            sock.once('data', () => resolve(sock.bytesWritten - sock.writableLength));
            setTimeout(() => reject(new Error('no answer to the long poll')), 10_000);
            sock.write(
                `GET /v1/jobs/${id}?wait=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.keys.c}\r\n` +
                    `If-None-Match: ${etag}\r\n\r\n`,
            );
            sock.write(flood);
        });
        sock.destroy();
        // Unread, the flood fills the socket buffers (a few MB) and stops; read, it would all have gone.
        assert.ok(handedToKernel < 16 * 1024 * 1024, `${handedToKernel} bytes taken while the long poll waited`);
        assert.equal((await t.c.get('/healthz')).status, 200);
    });

    it('a client that closes while its submit waits for the commit loses nothing, and the daemon goes on', async () => {
        const t = tenant(d);
        const { hostname, port } = new URL(d.url);
        for (let n = 0; n < 20; n++) {
            const sock = net.connect(Number(port), hostname);
            sock.on('error', () => {});
            sock.write(submitWire(t.keys.c, n), () => sock.destroy());
        }
        let kept = [];
        for (let i = 0; i < 50 && kept.length < 20; i++) {
            await sleep(100);
            kept = await listAll(t.c);
        }
        assert.equal(kept.length, 20);
        const again = await exchange(d, submitWire(t.keys.c, 99), 1);
        assert.equal(again[0].status, 202);
    });
});
