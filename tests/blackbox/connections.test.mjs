// limits.maxConnections: at the cap the daemon stops accepting; clients beyond it wait in the listen
// backlog (nobody is refused or answered with an error) and are served as soon as a connection closes.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { it, startDaemon, standardConfig } from './lib/daemon.mjs';
import { sleep } from './lib/jobs.mjs';

/* A keep-alive HTTP/1.1 connection that sends GET /healthz and collects what comes back. */
function connectAndAsk(d) {
    const { hostname, port } = new URL(d.url);
    const sock = net.connect(Number(port), hostname);
    const conn = { sock, data: '' };
    sock.on('data', (b) => (conn.data += b.toString('latin1')));
    sock.on('error', () => {});
    sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    return conn;
}

describe('limits.maxConnections', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 4096, maxWaitSeconds: 5, maxConnections: 2 }' }) });
    });
    after(() => d?.stop());

    it('a third connection waits until one of two open ones closes, then is served', async () => {
        const a = connectAndAsk(d);
        const b = connectAndAsk(d);
        await sleep(300);
        assert.match(a.data, /^HTTP\/1\.1 200/);
        assert.match(b.data, /^HTTP\/1\.1 200/);
        const c = connectAndAsk(d);
        await sleep(500);
        assert.equal(c.data, '', 'served past the connection cap');
        a.sock.destroy();
        for (let i = 0; i < 50 && c.data === ''; i++) await sleep(50);
        assert.match(c.data, /^HTTP\/1\.1 200/, 'not served after a connection closed');
        b.sock.destroy();
        c.sock.destroy();
    });
});
