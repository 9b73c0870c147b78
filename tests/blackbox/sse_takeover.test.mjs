// HTTP/1 event streams run on a connection the daemon takes over from h2o once the headers are out
// (src/http/sse.c, on_upgraded): the daemon writes the chunked framing itself (no framing on HTTP/1.0) and the
// end of the body, and it reads the connection, so a client that leaves ends its stream at once. Here the
// heartbeat is an hour away: only reading the connection can tell that the client left.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { submit, waitUntil } from './lib/jobs.mjs';
import { dechunk, holdsConnection } from './lib/sse.mjs';

const CONF = 'sse: { heartbeat: 1h, retry: 200ms }\n';

/** GET /v1/events with key over a socket of its own, as HTTP/1.<minor>: {sock, head(), body()}. */
function rawStream(d, key, minor) {
    const u = new URL(d.url);
    const sock = net.connect({ host: u.hostname, port: Number(u.port) });
    let data = Buffer.alloc(0);
    sock.on('data', (c) => {
        data = Buffer.concat([data, c]);
    });
    sock.on('error', () => {});
    sock.write(`GET /v1/events HTTP/1.${minor}\r\nHost: ${u.host}\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    const split = () => {
        const i = data.indexOf('\r\n\r\n');
        return i < 0 ? null : { head: data.subarray(0, i).toString('latin1'), rest: data.subarray(i + 4) };
    };
    return {
        sock,
        head: () => split()?.head ?? null,
        body: () => {
            const s = split();
            if (s === null) return '';
            return minor === 1 ? dechunk(s.rest).body.toString() : s.rest.toString();
        },
    };
}

describe('HTTP/1 event streams on a connection of their own', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() + CONF });
    });
    after(() => d?.stop());

    for (const minor of [1, 0]) {
        it(`HTTP/1.${minor}: events ${minor === 1 ? 'in chunks' : 'unframed'}; a client that leaves ends its stream at once`, async () => {
            const t = tenant(d);
            const s = rawStream(d, t.keys.c, minor);
            let clientPort;
            try {
                await waitUntil(async () => s.body(), (b) => b.includes('retry: 200\n\n'), { what: 'the retry line' });
                const head = s.head();
                assert.match(head, /^HTTP\/1\.1 200 /);
                assert.match(head, /\r\ncontent-type: text\/event-stream/i);
                assert.match(head, /\r\nx-request-id: \S+/i);
                assert.match(head, /\r\nconnection: close/i);
                if (minor === 1) assert.match(head, /\r\ntransfer-encoding: chunked/i);
                else assert.doesNotMatch(head, /transfer-encoding/i);
                clientPort = s.sock.localPort;
                const id = (await submit(t.c)).json.id;
                await waitUntil(async () => s.body(), (b) => b.includes('event: job') && b.includes(id), { what: 'the job event' });
            } finally {
                s.sock.destroy();
            }
            const held = async () => holdsConnection(d.proc.pid, Number(new URL(d.url).port), clientPort);
            await waitUntil(held, (h) => !h, { timeoutMs: 5000, what: 'the daemon to close the connection its client left' });
        });
    }
});
