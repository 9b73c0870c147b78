// Fan-out on /v1/events over HTTP/1.1: with hundreds of streams open, a change is written straight to the idle
// streams' sockets, half of them by a second thread (src/sse.c, ad_sse_write_many). Every stream must still get
// every change exactly once, in order, in valid chunked framing (node:http parses it strictly), while streams
// that are not idle (a replay in progress, a stream over HTTP/2) take the ordinary path beside them.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, submit } from './lib/jobs.mjs';
import { eventually, openSse, openSse2 } from './lib/sse.mjs';

const STREAMS = 600; // above the 512 direct writes from which the sender thread takes half
const CHANGES = 5;
const auth = (key) => ({ authorization: `Bearer ${key}` });

/** STREAMS /v1/events streams over HTTP/1.1 with key, opened 100 at a time. */
async function openMany(d, key) {
    const streams = [];
    for (let i = 0; i < STREAMS; i += 100) {
        const batch = [];
        for (let k = i; k < Math.min(STREAMS, i + 100); k++) batch.push(openSse(`${d.url}/v1/events`, { headers: auth(key) }));
        streams.push(...(await Promise.all(batch)));
    }
    return streams;
}

// Direct writes go through io_uring where the kernel allows it (sse.ioUring, the default), else send().
for (const ioUring of [true, false]) describe(`fan-out to many /v1/events streams (ioUring: ${ioUring})`, () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: standardConfig() + `sse: { heartbeat: 60s, maxStreams: 5000, maxStreamsPerTenant: 5000, ioUring: ${ioUring} }\n`,
        });
    });
    after(() => d?.stop());

    it(`delivers every change once and in order to ${STREAMS} HTTP/1.1 streams and to an HTTP/2 one`, async () => {
        const t = tenant(d);
        const streams = await openMany(d, t.keys.c);
        for (const s of streams) assert.equal(s.status, 200);
        const session = http2.connect(d.url);
        const h2 = await openSse2(session, '/v1/events', { headers: auth(t.keys.c) });
        assert.equal(h2.status, 200);
        try {
            const submitted = [];
            for (let k = 0; k < CHANGES; k++) {
                // Payloads of different sizes give chunks of different lengths (the framing carries the size).
                const res = expectStatus(await submit(t.c, { type: 'report.export', payload: { k, pad: 'x'.repeat(k * 700) } }), 202);
                submitted.push(res.json.id);
                await eventually(() => streams.every((s) => s.events.length > k) && h2.events.length > k, 20_000,
                    `change ${k + 1} on every stream`);
            }
            for (const s of [...streams, h2]) {
                assert.equal(s.error, null, `a stream failed: ${s.error}`);
                assert.equal(s.ended, false, 'a stream ended');
                const got = s.events.map((e) => JSON.parse(e.data).id);
                assert.deepEqual(got, submitted, 'a stream missed, repeated or reordered a change');
                assert.deepEqual(s.events.map((e) => e.event), Array(CHANGES).fill('job'));
            }
            // The daemon says once how its fan-out writes went out: through io_uring unless told not to.
            const said = d.stderr + d.stdout;
            if (ioUring) assert.match(said, /sse: fan-out writes go through io_uring/, 'io_uring was not used (kernel.io_uring_disabled?)');
            else assert.doesNotMatch(said, /io_uring/);
        } finally {
            for (const s of streams) s.close();
            h2.close();
            session.close();
        }
    });

    it(`keeps serving the others when half of ${STREAMS} streams vanish just before a fan-out`, async () => {
        const t = tenant(d);
        const streams = await openMany(d, t.keys.c);
        // Every other client resets its connection: the daemon learns of it only when it writes.
        const gone = streams.filter((_, i) => i % 2 === 0);
        const kept = streams.filter((_, i) => i % 2 === 1);
        for (const s of gone) s.req.socket.resetAndDestroy();
        try {
            const ids = [];
            for (let k = 0; k < 3; k++) {
                ids.push(expectStatus(await submit(t.c, { type: 'report.export', payload: { k } }), 202).json.id);
                await eventually(() => kept.every((s) => s.events.length > k), 20_000, `change ${k + 1} on every kept stream`);
            }
            for (const s of kept) assert.deepEqual(s.events.map((e) => JSON.parse(e.data).id), ids);
            expectStatus(await t.c.get('/v1/jobs?limit=1'), 200);
        } finally {
            for (const s of kept) s.close();
        }
    });

    it('sends an HTTP/1.0 stream its events without chunked framing', async () => {
        const t = tenant(d);
        const u = new URL(d.url);
        const sock = net.connect({ host: u.hostname, port: Number(u.port) });
        let data = '';
        sock.setEncoding('latin1');
        sock.on('data', (c) => {
            data += c;
        });
        sock.on('error', () => {});
        sock.write(`GET /v1/events HTTP/1.0\r\nHost: ${u.host}\r\nAuthorization: Bearer ${t.keys.c}\r\nAccept: text/event-stream\r\n\r\n`);
        try {
            await eventually(() => data.includes('\r\n\r\nretry: '), 5000, 'the stream to open');
            assert.match(data, /^HTTP\/1\.[01] 200 /);
            assert.doesNotMatch(data, /transfer-encoding/i);
            const id = expectStatus(await submit(t.c, { type: 'report.export', payload: {} }), 202).json.id;
            await eventually(() => data.includes(id), 5000, 'the event');
            const body = data.slice(data.indexOf('\r\n\r\n') + 4);
            assert.match(body, /^retry: \d+\n\nid: \d+\nevent: job\ndata: \{/, `not a plain event stream:\n${body.slice(0, 200)}`);
        } finally {
            sock.destroy();
        }
    });
});
