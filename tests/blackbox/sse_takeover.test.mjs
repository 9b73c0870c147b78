// HTTP/1 event streams run on a connection the daemon takes over from h2o once the headers are out
// (src/http/sse.c, on_upgraded): the daemon writes the chunked framing itself (no framing on HTTP/1.0) and the
// end of the body, and it reads the connection, so a client that leaves ends its stream at once. Here the
// heartbeat is an hour away: only reading the connection can tell that the client left.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { submit, waitUntil } from './lib/jobs.mjs';

const CONF = 'sse: { heartbeat: 1h, retry: 200ms }\n';

/** Whether process pid still holds the TCP connection from clientPort to serverPort on 127.0.0.1. */
function holdsConnection(pid, serverPort, clientPort) {
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
function dechunk(buf) {
    let off = 0;
    const parts = [];
    for (;;) {
        const eol = buf.indexOf('\r\n', off);
        if (eol < 0) return { body: Buffer.concat(parts).toString(), ended: false };
        const size = parseInt(buf.subarray(off, eol).toString('latin1'), 16);
        if (size === 0) return { body: Buffer.concat(parts).toString(), ended: true };
        if (buf.length < eol + 2 + size + 2) return { body: Buffer.concat(parts).toString(), ended: false };
        parts.push(buf.subarray(eol + 2, eol + 2 + size));
        off = eol + 2 + size + 2;
    }
}

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
            return minor === 1 ? dechunk(s.rest).body : s.rest.toString();
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
