// Webhooks to https receivers. The receiver's certificate is verified, here against `webhooks.caFile` (a
// throwaway self-signed certificate made with the openssl command line); one whose certificate is not trusted
// gets nothing, and each attempt says why. Deliveries go over HTTP/1.1 by default, even to a receiver that offers
// HTTP/2 (libcurl 7.88 resets each HTTP/2 stream it ends early, which Node's server answers with GOAWAY after
// about 1,000: see src/webhook/webhook.c); with `webhooks.http2: true` a receiver that offers HTTP/2 gets it,
// and deliveries started together share one connection. The receivers are node:http2 servers on 127.0.0.1.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { assertStartFails, it, startDaemon, tenant } from './lib/daemon.mjs';
import { expectStatus, sleep, submit } from './lib/jobs.mjs';
import { assertDelivery, createEndpoint, deliveries, stopClean, webhookConfig } from './lib/webhooks.mjs';

/** A self-signed certificate for 127.0.0.1 in dir: {key, cert} file paths. */
function makeCert(dir, name) {
    const key = path.join(dir, `${name}-key.pem`);
    const cert = path.join(dir, `${name}-cert.pem`);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
        '-keyout', key, '-out', cert, '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    return { key, cert };
}

/**
 * An https receiver on 127.0.0.1 answering 200, node:http2 offering h2 and http/1.1 by ALPN (h2only: h2 alone).
 * Records each request's {httpVersion, headers, body} and each TLS connection's ALPN protocol.
 */
async function startTlsReceiver({ key, cert }, { h2only = false } = {}) {
    const r = { requests: [], connections: [] };
    const opts = { key: fs.readFileSync(key), cert: fs.readFileSync(cert) };
    const onRequest = (req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            r.requests.push({ httpVersion: req.httpVersion, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
            res.writeHead(200);
            res.end();
        });
    };
    const server = http2.createSecureServer({ ...opts, allowHTTP1: !h2only }, onRequest);
    const sessions = [];
    const sockets = [];
    server.on('session', (s) => sessions.push(s));
    server.on('secureConnection', (sock) => {
        sockets.push(sock);
        r.connections.push(sock.alpnProtocol);
    });
    await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
    });
    r.url = `https://127.0.0.1:${server.address().port}`;
    r.close = () =>
        new Promise((resolve) => {
            server.close(resolve);
            for (const s of sessions) s.destroy();
            for (const s of sockets) s.destroy();
        });
    return r;
}

/**
 * An endpoint for rx's /hook (job.queued), then n jobs in one bulk submit (one commit: every delivery falls due
 * at once). Waits for n deliveries and checks each one; returns the endpoint.
 */
async function deliverMany(c, rx, n) {
    const hook = await createEndpoint(c, `${rx.url}/hook`, ['job.queued']);
    const jobs = Array.from({ length: n }, (_, i) => ({ type: 'report.export', payload: { n: i } }));
    const res = expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
    assert.ok(res.json.results.every((x) => x.status === 202), JSON.stringify(res.json));
    await waitFor(() => rx.requests.length >= n, `${n} deliveries`);
    const ids = new Set(rx.requests.map((q) => assertDelivery(q, hook.secret, { type: 'job.queued' }).id));
    assert.equal(ids.size, n);
    return hook;
}

async function waitFor(pred, what, timeoutMs = 15_000) {
    const deadline = Date.now() + timeoutMs;
    while (!(await pred())) {
        if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await sleep(25);
    }
}

describe('webhooks over TLS', () => {
    let dir;
    let trusted;
    let untrusted;
    let d;
    before(async () => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-whtls-'));
        trusted = makeCert(dir, 'trusted');
        untrusted = makeCert(dir, 'untrusted');
        d = await startDaemon({ config: webhookConfig({ extra: `  caFile: ${trusted.cert}\n` }) });
    });
    after(async () => {
        if (d) await stopClean(d);
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('a receiver offering HTTP/2 and HTTP/1.1 gets every delivery over HTTP/1.1 by default', async () => {
        const rx = await startTlsReceiver(trusted);
        try {
            const { c } = tenant(d);
            await deliverMany(c, rx, 40);
            assert.deepEqual([...new Set(rx.requests.map((q) => q.httpVersion))], ['1.1']);
            assert.deepEqual([...new Set(rx.connections)], ['http/1.1']);
            // Up to perEndpoint connections at once, kept alive: far fewer than the deliveries.
            assert.ok(rx.connections.length <= 16, `${rx.connections.length} connections`);
        } finally {
            await rx.close();
        }
    });

    it('with webhooks.http2, a receiver offering HTTP/2 gets every delivery over it, on one connection', async () => {
        const h2d = await startDaemon({ config: webhookConfig({ extra: `  caFile: ${trusted.cert}\n  http2: true\n` }) });
        const rx = await startTlsReceiver(trusted, { h2only: true });
        try {
            const { c } = tenant(h2d);
            // 40 due at once: 16 (perEndpoint) start in the same turn. Each waits for the first connection's
            // handshake and then shares it; without that wait each would open its own.
            const hook = await deliverMany(c, rx, 40);
            await sleep(200); // nothing more comes
            assert.equal(rx.requests.length, 40);
            assert.deepEqual([...new Set(rx.requests.map((q) => q.httpVersion))], ['2.0']);
            assert.deepEqual(rx.connections, ['h2'], 'deliveries started together should share one HTTP/2 connection');
            await waitFor(async () => (await deliveries(c, hook.id, 'delivered')).length === 40, 'the outcomes recorded');
        } finally {
            await rx.close();
            await stopClean(h2d);
        }
    });

    it('a receiver whose certificate is not trusted gets nothing; the attempt says why', async () => {
        const rx = await startTlsReceiver(untrusted);
        try {
            const { c } = tenant(d);
            const hook = await createEndpoint(c, `${rx.url}/hook`, ['job.queued']);
            await submit(c);
            let dead;
            await waitFor(async () => (dead = await deliveries(c, hook.id, 'dead')).length === 1, 'the delivery to be a dead letter');
            assert.equal(dead[0].attempts, 4);
            assert.equal(dead[0].lastStatus, null);
            assert.match(dead[0].lastError, /certificate/i, JSON.stringify(dead[0]));
            assert.equal(rx.requests.length, 0);
        } finally {
            await rx.close();
        }
    });

    it('refuses to start when webhooks.caFile holds no certificate', async () => {
        const notPem = path.join(dir, 'not.pem');
        fs.writeFileSync(notPem, 'not a certificate\n');
        for (const ca of [notPem, path.join(dir, 'missing.pem')]) {
            await assertStartFails({ config: webhookConfig({ extra: `  caFile: ${ca}\n` }) }, /webhooks\.caFile: .* holds no PEM certificate/);
        }
    });
});
