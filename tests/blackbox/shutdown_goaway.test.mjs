// SIGTERM tells HTTP/2 clients to stop: each open session gets GOAWAY with NO_ERROR (so it sends no new stream
// the daemon would not answer), and the daemon still exits 0 promptly, though the session stays open.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { it, startDaemon, standardConfig } from './lib/daemon.mjs';

describe('SIGTERM with an HTTP/2 session open', () => {
    it('sends GOAWAY(NO_ERROR) and exits 0', async () => {
        const d = await startDaemon({ config: standardConfig() });
        const session = http2.connect(d.url);
        session.on('error', () => {});
        try {
            const goaway = new Promise((resolve) => session.on('goaway', (code) => resolve(code)));
            const closed = new Promise((resolve) => session.on('close', () => resolve('closed')));
            // One answered request: the session is established.
            const status = await new Promise((resolve, reject) => {
                const st = session.request({ ':path': '/healthz' });
                st.on('response', (h) => resolve(h[':status']));
                st.on('error', reject);
                st.resume();
            });
            assert.equal(status, 200);
            const t0 = Date.now();
            d.proc.kill('SIGTERM');
            const first = await Promise.race([goaway, closed]);
            assert.equal(first, http2.constants.NGHTTP2_NO_ERROR, `the session ended without a GOAWAY (${first})`);
            assert.deepEqual(await d.waitExit(), { code: 0, signal: null });
            assert.ok(Date.now() - t0 < 5000, `the daemon took ${Date.now() - t0} ms to exit`);
        } finally {
            session.destroy();
            await d.stop();
        }
    });
});
