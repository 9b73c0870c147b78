// The example clients in examples/, each run as a user would run it (node or python3 from PATH, the URL and
// key in ACCEPTD_URL and ACCEPTD_KEY) against the real daemon, with the outcome checked through the API:
// the Node and Python clients (their library's wait()) get the result a worker completed; the Node and Python workers lease,
// report progress and complete; the webhook receivers in Node and Python accept the daemon's real deliveries
// (which the daemon then records as delivered) and refuse a body that was tampered with or a delivery with
// either signature wrong.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { complete, expectStatus, heartbeat, leaseOne, show, waitUntil } from './lib/jobs.mjs';
import { createEndpoint, deliveries, stopClean, webhookConfig } from './lib/webhooks.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const EXAMPLES = path.join(REPO_ROOT, 'examples');
const RUN_LIMIT_MS = 60_000;

const live = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
});

/**
 * Run an example: {proc, out (getter: stdout), err (getter: stderr), exited (promise of {code, signal}),
 * waitFor(re, stream) (resolves with the match once the output shows it), stop()}. Killed after RUN_LIMIT_MS.
 */
function runExample(cmd, args, env) {
    const proc = spawn(cmd, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(proc);
    const s = { out: '', err: '' };
    const waiters = [];
    const poke = () => {
        for (const w of [...waiters]) {
            const m = w.re.exec(s[w.stream]);
            if (m) {
                waiters.splice(waiters.indexOf(w), 1);
                w.resolve(m);
            }
        }
    };
    proc.stdout.setEncoding('utf8').on('data', (c) => {
        s.out += c;
        poke();
    });
    proc.stderr.setEncoding('utf8').on('data', (c) => {
        s.err += c;
        poke();
    });
    const timer = setTimeout(() => proc.kill('SIGKILL'), RUN_LIMIT_MS);
    const exited = new Promise((resolve) => {
        proc.on('exit', (code, signal) => {
            clearTimeout(timer);
            live.delete(proc);
            for (const w of waiters) w.reject(new Error(`${cmd} ${args.join(' ')} exited (${code}, ${signal}) before printing ${w.re}\nstdout:\n${s.out}\nstderr:\n${s.err}`));
            resolve({ code, signal });
        });
    });
    return {
        proc,
        exited,
        get out() {
            return s.out;
        },
        get err() {
            return s.err;
        },
        what: `${cmd} ${args.join(' ')}`,
        waitFor(re, stream = 'out') {
            return new Promise((resolve, reject) => {
                waiters.push({ re, stream, resolve, reject });
                poke();
            });
        },
        async stop() {
            if (live.has(proc)) proc.kill('SIGTERM');
            return exited;
        },
    };
}

const showRun = (r, x) => `${r.what}: ${JSON.stringify(x)}\nstdout:\n${r.out}\nstderr:\n${r.err}`;

/** A free loopback port (the receiver must be registered before it starts, since it needs the secret). */
async function freePort() {
    const s = net.createServer();
    await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
    const { port } = s.address();
    await new Promise((resolve) => s.close(resolve));
    return port;
}

/** Lease the job, report progress, complete it with result (the test plays the worker for the clients). */
async function work(t, type, id, result) {
    const l = await leaseOne(t.w, type, { expectId: id, wait: 5 });
    expectStatus(await heartbeat(t.w, id, l.leaseId, { progress: 60, message: 'halfway' }), 200);
    await complete(t.w, id, l.leaseId, { result });
}

/** The job's whole event history, read back from its stream once it has ended. */
async function eventHistory(d, key, id) {
    const res = await fetch(`${d.url}/v1/jobs/${id}/events`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
    assert.equal(res.status, 200);
    const text = await res.text();
    return [...text.matchAll(/^id: (\d+)\nevent: (\w+)\ndata: (.*)$/gm)].map((m) => ({ id: Number(m[1]), event: m[2], data: JSON.parse(m[3]) }));
}

describe('example clients', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: webhookConfig() });
    });
    after(async () => {
        await stopClean(d);
    });
    const envOf = (key) => ({ ACCEPTD_URL: d.url, ACCEPTD_KEY: key });

    it('examples/node/client.mjs submits, follows the job over SSE and prints its result', async () => {
        const t = tenant(d);
        const r = runExample(process.execPath, [path.join(EXAMPLES, 'node', 'client.mjs'), 'report.export', '{"month":"2026-11"}'], envOf(t.keys.c));
        const m = await r.waitFor(/submitted (job_\S+)/, 'err');
        const result = { rows: 42, month: '2026-11' };
        await work(t, 'report.export', m[1], result);
        const x = await r.exited;
        assert.deepEqual(x, { code: 0, signal: null }, showRun(r, x));
        assert.deepEqual(JSON.parse(r.out), result, showRun(r, x));
        // It saw the job move: the progress event and the final `done`.
        assert.match(r.err, /event progress id=\d+ status=running progress=60 message=halfway/, showRun(r, x));
        assert.match(r.err, /event done id=\d+ status=succeeded/, showRun(r, x));
        const job = expectStatus(await t.c.get(`/v1/jobs/${m[1]}`), 200).json;
        assert.equal(job.status, 'succeeded');
        assert.deepEqual(job.result, result);
    });

    it('examples/python/client.py submits, follows the job to its end and prints its result', async () => {
        const t = tenant(d);
        const r = runExample('python3', [path.join(EXAMPLES, 'python', 'client.py'), 'report.export', '{"month":"2026-10"}'], envOf(t.keys.c));
        const m = await r.waitFor(/submitted (job_\S+)/, 'err');
        const result = { rows: 7, month: '2026-10' };
        await work(t, 'report.export', m[1], result);
        const x = await r.exited;
        assert.deepEqual(x, { code: 0, signal: null }, showRun(r, x));
        assert.deepEqual(JSON.parse(r.out), result, showRun(r, x));
        // It saw the job move: the progress, then the end.
        assert.match(r.err, /status=running progress=60 message=halfway/, showRun(r, x));
        assert.match(r.err, new RegExp(`job ${m[1]} ended succeeded`), showRun(r, x));
        assert.equal(expectStatus(await t.c.get(`/v1/jobs/${m[1]}`), 200).json.status, 'succeeded');
    });

    it('examples/python/worker.py leases with a long poll, reports progress and completes', async () => {
        const t = tenant(d);
        const r = runExample('python3', [path.join(EXAMPLES, 'python', 'worker.py'), 'image.resize', '--jobs', '1'], envOf(t.keys.w));
        // Submitted while the worker's lease request is already waiting (or before it: either way it gets it).
        const sub = expectStatus(await t.c.post('/v1/jobs', { type: 'image.resize', payload: { width: 640, height: 480 } }), 202);
        const id = sub.json.id;
        const x = await r.exited;
        assert.deepEqual(x, { code: 0, signal: null }, showRun(r, x));
        assert.match(r.err, new RegExp(`${id}: completed \\(200\\), now succeeded`), showRun(r, x));
        const job = expectStatus(await t.c.get(`/v1/jobs/${id}`), 200).json;
        assert.equal(job.status, 'succeeded', show(sub));
        assert.deepEqual(job.result, { echo: { width: 640, height: 480 }, keys: 2, worker: 'python' });
        const progress = (await eventHistory(d, t.keys.c, id)).filter((e) => e.event === 'progress').map((e) => e.data.progress);
        assert.deepEqual(progress, [25, 50, 75]);
    });

    // A traced job's trace continues in the example workers: each logs the job's trace id and a downstream
    // traceparent of the same trace (docs/tracing.md).
    for (const [name, cmd, file] of [
        ['examples/node/worker.mjs', process.execPath, path.join(EXAMPLES, 'node', 'worker.mjs')],
        ['examples/python/worker.py', 'python3', path.join(EXAMPLES, 'python', 'worker.py')],
    ]) {
        it(`${name} continues a traced job's trace`, async () => {
            const t = tenant(d);
            const r = runExample(cmd, [file, 'image.resize', '--jobs', '1'], envOf(t.keys.w));
            const trace = '0af7651916cd43dd8448eb211c80319c';
            const sub = await t.c.post('/v1/jobs', { type: 'image.resize', payload: { width: 1 } }, { headers: { traceparent: `00-${trace}-b7ad6b7169203331-01` } });
            expectStatus(sub, 202);
            const x = await r.exited;
            assert.deepEqual(x, { code: 0, signal: null }, showRun(r, x));
            const m = new RegExp(`${sub.json.id}: trace ${trace} \\(lease 00-${trace}-([0-9a-f]{16})-01\\); downstream traceparent 00-${trace}-([0-9a-f]{16})-01`).exec(r.err);
            assert.ok(m, showRun(r, x));
            assert.notEqual(m[1], m[2], 'downstream is a span of its own');
            assert.equal(expectStatus(await t.c.get(`/v1/jobs/${sub.json.id}`), 200).json.status, 'succeeded');
        });
    }

    it('examples/node/worker.mjs leases with a long poll, reports progress and completes', async () => {
        const t = tenant(d);
        const r = runExample(process.execPath, [path.join(EXAMPLES, 'node', 'worker.mjs'), 'image.resize', '--jobs', '1'], envOf(t.keys.w));
        const sub = expectStatus(await t.c.post('/v1/jobs', { type: 'image.resize', payload: { width: 640, height: 480 } }), 202);
        const id = sub.json.id;
        const x = await r.exited;
        assert.deepEqual(x, { code: 0, signal: null }, showRun(r, x));
        assert.match(r.err, /stopped after 1 job\(s\): \{"succeeded":1,"failed":0,"cancelled":0,"lost":0\}/, showRun(r, x));
        const job = expectStatus(await t.c.get(`/v1/jobs/${id}`), 200).json;
        assert.equal(job.status, 'succeeded', show(sub));
        assert.deepEqual(job.result, { echo: { width: 640, height: 480 }, keys: 2, worker: 'node' });
        const progress = (await eventHistory(d, t.keys.c, id)).filter((e) => e.event === 'progress').map((e) => e.data.progress);
        assert.deepEqual(progress, [25, 50, 75]);
    });

    for (const [name, cmd, file] of [
        ['examples/node/webhook-receiver.mjs', process.execPath, path.join(EXAMPLES, 'node', 'webhook-receiver.mjs')],
        ['examples/python/webhook_receiver.py', 'python3', path.join(EXAMPLES, 'python', 'webhook_receiver.py')],
    ]) {
        it(`${name} accepts the daemon's signed deliveries and refuses tampered ones`, async () => {
            const t = tenant(d);
            // The port is chosen before the receiver binds it; should something else take it meanwhile, the
            // receiver exits, and the endpoint is made again on another port.
            let port;
            let hook;
            let r;
            for (let i = 0; ; i++) {
                port = await freePort();
                hook = await createEndpoint(t.c, `http://127.0.0.1:${port}/hooks/acceptd`);
                r = runExample(cmd, [file], { PORT: String(port), WEBHOOK_SECRET: hook.secret });
                try {
                    await r.waitFor(/^listening on http:\/\/127\.0\.0\.1:(\d+)$/m);
                    break;
                } catch (e) {
                    if (i === 2 || !/EADDRINUSE|Address already in use/.test(r.err)) throw e;
                    expectStatus(await t.c.req('DELETE', `/v1/webhooks/${hook.id}`), 204);
                }
            }
            try {

                // Real deliveries: a job's queued, started and succeeded events.
                const id = expectStatus(await t.c.post('/v1/jobs', { type: 'email.send', payload: { to: 'a@example.com' } }), 202).json.id;
                await work(t, 'email.send', id, { sent: true });
                const delivered = await waitUntil(
                    () => deliveries(t.c, hook.id),
                    (items) => items.length === 3 && items.every((i) => i.status === 'delivered'),
                    { timeoutMs: 20_000, what: 'three deliveries delivered' },
                );
                for (const dl of delivered) assert.equal(dl.lastStatus, 204, JSON.stringify(dl));
                assert.deepEqual(delivered.map((i) => i.eventType).sort(), ['job.queued', 'job.started', 'job.succeeded']);
                for (const dl of delivered) assert.match(r.out, new RegExp(`^accepted ${dl.eventId} ${dl.eventType.replace('.', '\\.')} \\S+/v1/jobs/${id}$`, 'm'), showRun(r, dl));
                assert.doesNotMatch(r.out, /rejected/, showRun(r, 'no rejections'));

                // Requests made here, signed as the daemon signs: each must be refused.
                const body = JSON.stringify({ id: 'evt_test', type: 'job.succeeded', version: '2026-12-05', createdAt: new Date().toISOString(), data: { job: `${d.url}/v1/jobs/${id}` } });
                const ts = String(Math.floor(Date.now() / 1000));
                const std = (b, secret = hook.secret) => `v1,${crypto.createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(`evt_test.${ts}.${b}`).digest('base64')}`;
                const stripe = (b, secret = hook.secret) => `t=${ts},v1=${crypto.createHmac('sha256', secret).update(`${ts}.${b}`).digest('hex')}`;
                const post = async (b, headers) => {
                    const res = await fetch(`http://127.0.0.1:${port}/hooks/acceptd`, {
                        method: 'POST',
                        headers: { 'content-type': 'application/json', 'webhook-id': 'evt_test', 'webhook-timestamp': ts, ...headers },
                        body: b,
                        signal: AbortSignal.timeout(10_000),
                    });
                    await res.text();
                    return res.status;
                };
                const other = `whsec_${crypto.randomBytes(32).toString('base64')}`;
                // The control: signed right, accepted.
                assert.equal(await post(body, { 'webhook-signature': std(body), 'x-webhook-signature': stripe(body) }), 204, showRun(r, 'control'));
                const tampered = body.replace('job.succeeded', 'job.failed');
                const cases = {
                    'tampered body': [tampered, { 'webhook-signature': std(body), 'x-webhook-signature': stripe(body) }],
                    'Standard Webhooks signature by another secret': [body, { 'webhook-signature': std(body, other), 'x-webhook-signature': stripe(body) }],
                    'Stripe-style signature by another secret': [body, { 'webhook-signature': std(body), 'x-webhook-signature': stripe(body, other) }],
                    'no Stripe-style signature': [body, { 'webhook-signature': std(body) }],
                };
                for (const [what, [b, h]] of Object.entries(cases)) {
                    const before = (r.out.match(/^rejected/gm) ?? []).length;
                    assert.equal(await post(b, h), 400, `${what}\n${showRun(r, what)}`);
                    await r.waitFor(new RegExp(`(?:^rejected.*\\n[^]*){${before + 1}}`, 'm'));
                }
            } finally {
                const x = await r.stop();
                assert.equal(x.code === 0 || x.signal === 'SIGTERM', true, showRun(r, x));
            }
        });
    }
});
