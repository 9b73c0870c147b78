// The SSRF guard, black-box, with loopback targets only (127.0.0.1, 127.0.0.2, [::1], `localhost`, and a name
// that /etc/hosts maps to loopback). Without an allow-list each destination is refused, either when it is set
// (422) or when it is dialled (a failed attempt whose error says why), and a listener on each address sees
// no connection at all. With loopback allow-listed, deliveries to the same addresses arrive. No traffic goes
// anywhere but loopback: every other range is covered by the classifier's unit tests (tests/unit/test_ssrf.c).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, runToSuccess, sleep, submit, waitUntil } from './lib/jobs.mjs';
import { assertDelivery, createEndpoint, deliveries, startListener, startReceiver, stopClean, webhookConfig } from './lib/webhooks.mjs';

/** A name other than localhost that /etc/hosts maps to a loopback address, or null. Looked up in files only. */
function loopbackAlias() {
    let text = '';
    try {
        text = fs.readFileSync('/etc/hosts', 'utf8');
    } catch {
        return null;
    }
    for (const line of text.split('\n')) {
        const [addr, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
        if (!addr || !(addr.startsWith('127.') || addr === '::1')) continue;
        const name = names.find((n) => n && !/(^|\.)localhost\.?$/i.test(n) && /^[a-z0-9.-]+$/i.test(n));
        if (name) return { name, addr };
    }
    return null;
}

describe('webhook SSRF guard without an allow-list', () => {
    let d;
    const listeners = [];
    before(async () => {
        d = await startDaemon({ config: webhookConfig({ allow: [], schedule: ['0', '200ms'] }) });
        listeners.push(await startListener('127.0.0.1'));
        listeners.push(await startListener('127.0.0.2'));
        listeners.push(await startListener('::1'));
    });
    after(async () => {
        for (const l of listeners) await l.close();
        await stopClean(d);
    });

    it('refuses loopback destinations when they are set: endpoints and callbackUrl', async () => {
        const t = tenant(d);
        const [v4, v4b, v6] = listeners;
        const urls = [
            `http://127.0.0.1:${v4.port}/hook`,
            `http://127.0.0.2:${v4b.port}/hook`,
            `http://[::1]:${v6.port}/hook`,
            `http://localhost:${v4.port}/hook`,
            `http://LocalHost.:${v4.port}/hook`,
            `http://[::ffff:127.0.0.1]:${v4.port}/hook`,
            `http://2130706433:${v4.port}/hook`, // 127.0.0.1 as one number
            `http://0x7f.1:${v4.port}/hook`,
        ];
        for (const url of urls) {
            const p = assertProblem(await t.c.post('/v1/webhooks', { url }), 422, 'validation-failed');
            const e = p.errors.find((x) => x.pointer === '/url');
            assert.ok(e, `${url}: ${JSON.stringify(p)}`);
            assert.match(e.detail, /refused destination: .*(loopback|IPv4-mapped)/, url);
            const s = assertProblem(await t.c.post('/v1/jobs', { type: 'report.export', callbackUrl: url }), 422, 'validation-failed');
            assert.ok(s.errors.some((x) => x.pointer === '/callbackUrl'), `${url}: ${JSON.stringify(s)}`);
        }
        assert.equal(expectStatus(await t.c.get('/v1/webhooks'), 200).json.items.length, 0);
        await sleep(200);
        for (const l of listeners) assert.equal(l.connections, 0, `${l.host} saw a connection`);
    });

    it('refuses a name that resolves to loopback when it is dialled: a failed attempt, no connection', async () => {
        const alias = loopbackAlias();
        // .ci/run makes sure there is one (the machine's own name usually is one already).
        assert.ok(alias, 'this test needs a name other than localhost that /etc/hosts maps to loopback');
        const listener = listeners.find((l) => l.host === alias.addr) ?? (await startListener(alias.addr));
        if (!listeners.includes(listener)) listeners.push(listener);
        const tn = tenant(d);
        const url = `http://${alias.name}:${listener.port}/hook`;
        const hook = await createEndpoint(tn.c, url, ['job.queued']); // a name: judged when dialled
        expectStatus(await tn.c.post('/v1/webhooks/callback:rotate', {}), 200); // a callbackUrl needs a callback secret
        await runToSuccess(tn.c, tn.w, { type: 'report.export', payload: {}, callbackUrl: url });
        const dead = await waitUntil(() => deliveries(tn.c, hook.id, 'dead'), (l) => l.length === 1, { what: 'the refused delivery to end' });
        assert.equal(dead[0].attempts, 2);
        assert.equal(dead[0].lastStatus, null);
        assert.match(dead[0].lastError, new RegExp(`${alias.name} resolves to ${alias.addr.replace(/\./g, '\\.')} is loopback`));
        const cb = await waitUntil(() => deliveries(tn.c, 'callback', 'dead'), (l) => l.length === 1, { what: 'the refused callback to end' });
        assert.match(cb[0].lastError, /loopback/);
        for (const l of listeners) assert.equal(l.connections, 0, `${l.host} saw a connection`);
    });
});

describe('webhook SSRF guard with loopback allow-listed', () => {
    let d;
    const rxs = [];
    before(async () => {
        d = await startDaemon({ config: webhookConfig({ allow: ['127.0.0.0/8', '::1/128'] }) });
        rxs.push(await startReceiver({ host: '127.0.0.1' }));
        rxs.push(await startReceiver({ host: '127.0.0.2' }));
        rxs.push(await startReceiver({ host: '::1' }));
    });
    after(async () => {
        for (const r of rxs) await r.close();
        await stopClean(d);
    });

    it('delivers to 127.0.0.1, 127.0.0.2, [::1] and localhost', async () => {
        const t = tenant(d);
        const [v4, v4b, v6] = rxs;
        const targets = [
            [v4, `${v4.url}/a`],
            [v4b, `${v4b.url}/b`],
            [v6, `${v6.url}/c`],
            [v4, `http://localhost:${v4.port}/d`],
        ];
        const hooks = [];
        for (const [, url] of targets) hooks.push(await createEndpoint(t.c, url, ['job.queued']));
        await submit(t.c);
        for (let i = 0; i < targets.length; i++) {
            const [rx, url] = targets[i];
            const p = new URL(url).pathname;
            await rx.waitFor((qs) => qs.some((q) => q.path === p), { what: url });
            assertDelivery(rx.requests.find((q) => q.path === p), hooks[i].secret, { type: 'job.queued' });
        }
    });
});
