// TLS (config `tls: {cert, key}`): the listener speaks HTTPS, offering h2 by ALPN before http/1.1, so a
// browser gets HTTP/2 and its SSE streams share one connection. The certificate is a throwaway self-signed
// one made with the openssl command line; requests go through node's https and http2 clients with it.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { assertStartFails, it, standardConfig, startDaemon } from './lib/daemon.mjs';
import { openSse2, sseParser } from './lib/sse.mjs';

/** JSON request over https (HTTP/1.1) with the test CA. */
function req(url, method, p, { key, body, ca }) {
    return new Promise((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const headers = { authorization: `Bearer ${key}`, ...(data ? { 'content-type': 'application/json' } : {}) };
        const r = https.request(`${url}${p}`, { method, ca, headers, ALPNProtocols: ['http/1.1'] }, (res) => {
            const alpn = res.socket.alpnProtocol;
            let text = '';
            res.on('data', (c) => {
                text += c;
            });
            res.on('end', () => resolve({ status: res.statusCode, json: text ? JSON.parse(text) : null, alpn }));
        });
        r.on('error', reject);
        r.end(data);
    });
}

describe('TLS with h2 by ALPN', () => {
    let dir;
    let d;
    let ca;
    before(async () => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-tls-'));
        execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
            '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-subj', '/CN=127.0.0.1',
            '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
        ca = fs.readFileSync(path.join(dir, 'cert.pem'));
        d = await startDaemon({ config: `${standardConfig()}sse: { heartbeat: 300ms, retry: 200ms }\ntls: { cert: ${dir}/cert.pem, key: ${dir}/key.pem }\n` });
    });
    after(async () => {
        if (d) assert.deepEqual(await d.stop(), { code: 0, signal: null });
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('serves HTTP/1.1 over TLS and announces an https URL', async () => {
        assert.match(d.url, /^https:\/\/127\.0\.0\.1:\d+$/);
        const sub = await req(d.url, 'POST', '/v1/jobs', { key: 'ka', body: { type: 'report.export', payload: {} }, ca });
        assert.equal(sub.status, 202);
        assert.equal(sub.alpn, 'http/1.1');
        assert.match(sub.json.links.self, /^\/v1\/jobs\//);
        // A stream over https/1.1.
        const events = await new Promise((resolve, reject) => {
            https.get(`${d.url}/v1/jobs/${sub.json.id}/events`, { ca, headers: { authorization: 'Bearer ka' } }, (res) => {
                const got = [];
                const p = sseParser({ onEvent: (e) => got.push(e) });
                res.setEncoding('utf8');
                res.on('data', (c) => {
                    p.feed(c);
                    if (got.length >= 1) {
                        res.destroy();
                        resolve({ status: res.statusCode, got });
                    }
                });
            }).on('error', reject);
        });
        assert.equal(events.status, 200);
        assert.equal(JSON.parse(events.got[0].data).status, 'queued');
    });

    it('negotiates h2 and carries many event streams on one TLS connection', async () => {
        const session = http2.connect(d.url, { ca });
        session.on('error', () => {});
        try {
            await new Promise((resolve, reject) => session.once('connect', resolve).once('error', reject));
            assert.equal(session.alpnProtocol, 'h2');
            const auth = { authorization: 'Bearer ka' };
            const ids = [];
            for (let i = 0; i < 10; i++) ids.push((await req(d.url, 'POST', '/v1/jobs', { key: 'ka', body: { type: 'report.export', payload: {} }, ca })).json.id);
            const streams = await Promise.all(ids.map((id) => openSse2(session, `/v1/jobs/${id}/events`, { headers: auth })));
            await Promise.all(streams.map((s) => s.waitEvents(1)));
            for (const id of ids) assert.equal((await req(d.url, 'DELETE', `/v1/jobs/${id}`, { key: 'ka', ca })).status, 200);
            await Promise.all(streams.map((s) => s.waitEnd()));
            streams.forEach((s, i) => {
                assert.equal(s.status, 200);
                assert.deepEqual(s.events.map((e) => [e.event, JSON.parse(e.data).id, JSON.parse(e.data).status]), [
                    ['status', ids[i], 'queued'], ['done', ids[i], 'cancelled'],
                ]);
            });
        } finally {
            session.close();
        }
    });

    it('refuses to start with a key but no certificate, or an unreadable certificate', async () => {
        for (const tls of [`{ key: ${dir}/key.pem }`, `{ cert: ${dir}/nope.pem, key: ${dir}/key.pem }`]) {
            await assertStartFails({ config: `tls: ${tls}\n` }, /tls: /);
        }
    });
});
