// Connection (src/conn.mjs), a worker loop's own keep-alive socket, against a node:http server on loopback: the
// answers it must read besides the daemon's (chunked, Connection: close, 204), a socket the server closed while
// idle (the next request goes on a new one), a request sent on a socket the server closes as it arrives (sent
// once more on a new one), and an abort while the answer is awaited (the socket is closed).

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Connection } from '../src/conn.mjs';

describe('Connection', () => {
    let srv;
    let base;
    const sockets = new Set();
    let dropNext = false;
    before(async () => {
        srv = http.createServer((req, res) => {
            let b = '';
            req.on('data', (c) => (b += c));
            req.on('end', () => {
                if (dropNext) {
                    dropNext = false;
                    return void req.socket.destroy(); // as a server ending an idle keep-alive just then
                }
                if (req.url === '/chunked') {
                    res.write('{"a":');
                    return void res.end('1}');
                }
                if (req.url === '/close') return void res.writeHead(200, { connection: 'close' }).end('bye');
                if (req.url === '/204') return void res.writeHead(204).end();
                if (req.url === '/hang') return;
                res.end(JSON.stringify({ echo: b, port: req.socket.remotePort }));
            });
        });
        srv.on('connection', (s) => sockets.add(s));
        await new Promise((r) => srv.listen(0, '127.0.0.1', r));
        base = `http://127.0.0.1:${srv.address().port}`;
    });
    after(() => {
        srv.closeAllConnections();
        srv.close();
    });

    it('reads chunked, closing and bodiless answers, and keeps the socket alive between requests', async () => {
        const c = new Connection(base);
        try {
            assert.deepEqual(await (await c.fetch(`${base}/chunked`)).json(), { a: 1 });
            const a = await (await c.fetch(`${base}/x`, { method: 'POST', body: 'hi', headers: { 'content-type': 'text/plain' } })).json();
            const b = await (await c.fetch(`${base}/x`, { method: 'POST', body: Buffer.from('again') })).json();
            assert.equal(a.echo, 'hi');
            assert.equal(b.echo, 'again');
            assert.equal(a.port, b.port, 'one socket for both');
            assert.equal((await c.fetch(`${base}/204`)).status, 204);
            assert.equal(await (await c.fetch(`${base}/close`)).text(), 'bye');
            assert.equal(c.socket, null, 'closed after Connection: close');
            const d = await (await c.fetch(`${base}/x`, { method: 'POST', body: 'new' })).json();
            assert.notEqual(d.port, b.port);
        } finally {
            c.close();
        }
    });

    it('goes on over a new socket when the server closed the idle one, or closes it as a request arrives', async () => {
        const c = new Connection(base);
        try {
            const a = await (await c.fetch(`${base}/x`, { method: 'POST', body: '1' })).json();
            for (const s of sockets) if (s.remotePort === a.port) s.destroy(); // closed while idle
            await new Promise((r) => setTimeout(r, 50));
            const b = await (await c.fetch(`${base}/x`, { method: 'POST', body: '2' })).json();
            assert.notEqual(b.port, a.port);
            dropNext = true; // closed as the request arrives: sent again on a new socket
            const e = await (await c.fetch(`${base}/x`, { method: 'POST', body: '3' })).json();
            assert.equal(e.echo, '3');
            assert.notEqual(e.port, b.port);
        } finally {
            c.close();
        }
    });

    it('rejects with the signal\'s reason when aborted, and closes the socket', async () => {
        const c = new Connection(base);
        const ac = new AbortController();
        setTimeout(() => ac.abort(new Error('stop now')), 50);
        await assert.rejects(c.fetch(`${base}/hang`, { signal: ac.signal }), /stop now/);
        assert.equal(c.socket, null);
    });
});
