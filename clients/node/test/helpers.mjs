// Shared by the library's tests: the real daemon (tests/blackbox/lib/daemon.mjs starts ACCEPTD_BIN), and a
// small HTTP proxy on loopback that forwards to it but can refuse or cut chosen requests, to play the
// intermediaries the library must survive (one that refuses event streams, one that drops an upload part).

import http from 'node:http';
import { after } from 'node:test';

export { startDaemon, standardConfig, tenant } from '../../../tests/blackbox/lib/daemon.mjs';

/**
 * A proxy to target (a base URL). intercept(req) may return {status, headers, body} to answer itself,
 * 'drop' to destroy the connection without answering, 'cut' to forward but destroy the connection once the
 * first whole SSE event (up to a blank line after a data line) went back, 'lose' to forward but destroy
 * the connection instead of answering once the daemon answered, {cutAfter: N} to forward but destroy the
 * connection once N bytes of the answer's body went back, {cutRequestAfter: N} to forward the first N bytes
 * of the request's body and then destroy both connections (the daemon sees a part cut short), or nothing to
 * forward. Every request
 * is recorded in log as {at, method, url, headers}.
 */
const proxies = new Set();
// A test that failed before closing its proxy would keep the run alive: close whatever is left at the end.
after(() => Promise.all([...proxies].map((p) => p.close())));

export async function startProxy(target, intercept = () => null) {
    const t = new URL(target);
    const p = { log: [], intercept };
    const server = http.createServer((req, res) => {
        p.log.push({ at: Date.now(), method: req.method, url: req.url, headers: req.headers });
        const a = p.intercept(req);
        if (a === 'drop') {
            req.resume();
            req.on('end', () => req.socket.destroy());
            return;
        }
        if (a?.cutRequestAfter !== undefined) {
            const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers });
            up.on('error', () => {});
            let left = a.cutRequestAfter;
            req.on('data', (c) => {
                if (left <= 0) return;
                const part = c.length > left ? c.subarray(0, left) : c;
                left -= part.length;
                up.write(part);
                if (left === 0) {
                    up.destroy();
                    req.socket.destroy();
                }
            });
            return;
        }
        if (a && a !== 'cut' && a !== 'lose' && a.cutAfter === undefined) {
            req.resume();
            res.writeHead(a.status, a.headers ?? {});
            res.end(a.body ?? '');
            return;
        }
        const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
            if (a === 'lose') {
                // The request reached the daemon and was answered; the answer never reaches the client.
                ur.resume();
                ur.on('end', () => res.socket.destroy());
                return;
            }
            res.writeHead(ur.statusCode, ur.headers);
            if (a?.cutAfter !== undefined) {
                let left = a.cutAfter;
                ur.on('data', (c) => {
                    if (left <= 0) return;
                    const part = c.length > left ? c.subarray(0, left) : c;
                    left -= part.length;
                    if (left > 0) return void res.write(part);
                    ur.destroy();
                    res.write(part, () => res.socket.destroy());
                });
                ur.on('end', () => res.end());
                return;
            }
            if (a !== 'cut') return void ur.pipe(res);
            let buf = Buffer.alloc(0);
            ur.on('data', (c) => {
                const start = buf.length;
                buf = Buffer.concat([buf, c]);
                const m = /data:[^\n]*\n\n/.exec(buf.toString('latin1')); // latin1: one char per byte
                if (!m) return void res.write(c);
                ur.destroy();
                res.write(buf.subarray(start, m.index + m[0].length), () => res.socket.destroy());
            });
        });
        up.on('error', () => res.destroy());
        req.pipe(up);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    p.url = `http://127.0.0.1:${server.address().port}`;
    p.close = () =>
        new Promise((resolve) => {
            proxies.delete(p);
            server.close(() => resolve());
            server.closeAllConnections();
        });
    proxies.add(p);
    return p;
}
