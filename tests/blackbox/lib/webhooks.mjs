// Webhook test helpers: a real HTTP receiver (node:http on a loopback address) that records every request
// and connection, signature checks with the npm packages receivers use (`stripe` and `standardwebhooks`),
// and the configuration the webhook tests run with. Only loopback addresses are ever used.

import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { standardConfig } from './daemon.mjs';
import { expectStatus, show, sleep } from './jobs.mjs';

const stripe = new Stripe('sk_test_unused_no_network'); // constructEvent only computes; it never calls out

/**
 * standardConfig() plus a webhooks section. allow: the allow-list (default: loopback, as the tests need);
 * schedule: retrySchedule (default short, so retries happen within a test).
 */
export function webhookConfig({ allow = ['127.0.0.0/8', '::1/128'], schedule = ['0', '300ms', '300ms', '300ms'], timeoutSeconds = 5, extra = '' } = {}) {
    const list = (xs) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
    return `${standardConfig()}webhooks:
  allowNetworks: ${list(allow)}
  retrySchedule: ${list(schedule)}
  timeoutSeconds: ${timeoutSeconds}
${extra}`;
}

/**
 * A receiver on host (default 127.0.0.1) and an ephemeral port (or port). Every request is recorded as
 * {at (ms), path, headers, body} in requests; connections counts accepted TCP connections. respond(req) decides
 * each answer: {status, headers, body, delayMs} (default 200). close() stops it (and drops open connections);
 * listen() brings it back on the same port.
 */
export async function startReceiver({ host = '127.0.0.1', port = 0, respond = () => ({ status: 200 }) } = {}) {
    const r = {
        host,
        port,
        requests: [],
        connections: 0,
        respond,
        server: null,
        get url() {
            return `http://${host.includes(':') ? `[${host}]` : host}:${r.port}`;
        },
        async listen() {
            const server = http.createServer((req, res) => {
                const chunks = [];
                req.on('data', (c) => chunks.push(c));
                req.on('end', async () => {
                    const rec = { at: Date.now(), method: req.method, path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
                    r.requests.push(rec);
                    const a = (await r.respond(rec)) ?? {};
                    if (a.delayMs) await sleep(a.delayMs);
                    if (res.destroyed) return;
                    res.writeHead(a.status ?? 200, a.headers ?? {});
                    res.end(a.body ?? '');
                });
            });
            server.keepAliveTimeout = 30_000;
            server.on('connection', () => {
                r.connections++;
            });
            await new Promise((resolve, reject) => {
                server.once('error', reject);
                server.listen(r.port, host, resolve);
            });
            r.port = server.address().port;
            r.server = server;
            return r;
        },
        async close() {
            if (!r.server) return;
            const s = r.server;
            r.server = null;
            await new Promise((resolve) => {
                s.close(resolve);
                s.closeAllConnections();
            });
        },
        /** Wait until pred(requests) holds; fails after timeoutMs with what arrived. */
        async waitFor(pred, { timeoutMs = 15_000, what = 'requests' } = {}) {
            const deadline = Date.now() + timeoutMs;
            while (!pred(r.requests)) {
                if (Date.now() > deadline) {
                    assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; got ${r.requests.length}: ${r.requests.slice(-3).map((q) => q.body).join(' | ')}`);
                }
                await sleep(25);
            }
            return r.requests;
        },
    };
    return r.listen();
}

/** A TCP listener that only counts connections (and closes them): to prove nothing was dialled. */
export async function startListener(host, port = 0) {
    const l = { host, port, connections: 0 };
    const server = net.createServer((sock) => {
        l.connections++;
        sock.destroy();
    });
    await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, resolve);
    });
    l.port = server.address().port;
    l.close = () => new Promise((resolve) => server.close(resolve));
    return l;
}

/** Verify one delivery with secret both ways, as receivers do; returns the event. Throws when it does not verify. */
export function verifyDelivery(req, secret) {
    const h = req.headers;
    const sw = new Webhook(secret).verify(req.body, {
        'webhook-id': h['webhook-id'],
        'webhook-timestamp': h['webhook-timestamp'],
        'webhook-signature': h['webhook-signature'],
    });
    const st = stripe.webhooks.constructEvent(req.body, h['x-webhook-signature'], secret);
    assert.deepEqual(sw, st);
    return st;
}

/** True when the delivery verifies with secret both ways. */
export function verifies(req, secret) {
    try {
        verifyDelivery(req, secret);
        return true;
    } catch {
        return false;
    }
}

/**
 * Every delivery's shape: the body is {id, type, createdAt, data: {job}}, webhook-id and Idempotency-Key are the
 * event id, and it verifies with secret both ways.
 */
/** The version of the webhook event catalog every event carries. */
export const WEBHOOK_VERSION = '2026-12-05';

export function assertDelivery(req, secret, { type, jobUrl } = {}) {
    const ev = verifyDelivery(req, secret);
    assert.deepEqual(Object.keys(ev).sort(), ['createdAt', 'data', 'id', 'type', 'version'], req.body);
    // The catalog version (docs/webhooks.md): in the signed body and in Webhook-Version, the same.
    assert.equal(ev.version, WEBHOOK_VERSION, req.body);
    assert.equal(req.headers['webhook-version'], WEBHOOK_VERSION);
    assert.match(ev.id, /^evt_[A-Za-z0-9_-]{28}$/, req.body);
    assert.equal(req.headers['webhook-id'], ev.id);
    assert.equal(req.headers['idempotency-key'], ev.id);
    assert.match(req.headers['content-type'], /^application\/json/);
    assert.match(ev.createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.deepEqual(Object.keys(ev.data), ['job'], req.body);
    if (type !== undefined) assert.equal(ev.type, type, req.body);
    if (jobUrl !== undefined) assert.equal(ev.data.job, jobUrl, req.body);
    return ev;
}

/** SIGTERM the daemon and assert a clean exit: status 0 and no sanitizer report (leaks included). */
export async function stopClean(d) {
    const { code, signal } = await d.stop();
    assert.equal(signal, null, `acceptd died of ${signal}`);
    assert.equal(code, 0, `acceptd exited with ${code}:\n${d.stderr.slice(-4000)}`);
    assert.ok(!/Sanitizer|runtime error:/.test(d.stderr), d.stderr.slice(-4000));
}

/** POST /v1/webhooks and assert 201 with a secret; returns the endpoint (with its secret). */
export async function createEndpoint(c, url, events) {
    const res = expectStatus(await c.post('/v1/webhooks', events === undefined ? { url } : { url, events }), 201);
    assert.match(res.json.secret ?? '', /^whsec_[A-Za-z0-9+/]{43}=$/, show(res));
    assert.equal(res.headers.get('location'), `/v1/webhooks/${res.json.id}`);
    return res.json;
}

/** The deliveries of an endpoint ("callback" for job callbacks), optionally of one status. */
export async function deliveries(c, hookId, status) {
    const q = status ? `?status=${status}&limit=500` : '?limit=500';
    return expectStatus(await c.get(`/v1/webhooks/${hookId}/deliveries${q}`), 200).json.items;
}
