// Azure compatibility: @azure/core-lro's createHttpPoller, driven by nothing but the LongRunningOperation
// adapter its docs ask for, ends on every final state (partialSuccess included) with the result or the error;
// the status monitor behind Operation-Location; the Azure sample's OnPending/OnComplete modes; 202 while pending.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpPoller } from '@azure/core-lro';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, fail, heartbeat, hget, leaseOne, sleep, submit } from './lib/jobs.mjs';
import * as openapi from './lib/openapi.mjs';

const ROUTES = `
  - { method: POST, path: /v1/azure, type: report.export, onPending: accepted, azureAsyncOperation: true }`;

/** The adapter @azure/core-lro asks for: the initial request and the polls as real fetch calls, nothing else. */
function lro(d, key, path, body) {
    const auth = { authorization: `Bearer ${key}` };
    const send = async (method, url, payload) => {
        const res = await fetch(new URL(url, d.url), {
            method,
            headers: payload === undefined ? auth : { ...auth, 'content-type': 'application/json' },
            body: payload === undefined ? undefined : JSON.stringify(payload),
        });
        const text = await res.text();
        // The poller's answers are checked against docs/openapi.json too, as api()'s are.
        const target = new URL(url, d.url);
        const violation = openapi.check({ method, target: target.pathname + target.search, status: res.status, headers: res.headers, text });
        if (violation) throw new Error(violation);
        const parsed = text.length > 0 ? JSON.parse(text) : undefined;
        const headers = {};
        res.headers.forEach((v, k) => { headers[k] = v; });
        return { flatResponse: parsed, rawResponse: { statusCode: res.status, request: { method, url: res.url }, headers, body: parsed } };
    };
    return {
        sendInitialRequest: () => send('POST', path, body),
        sendPollRequest: (p) => send('GET', p),
    };
}

/** Start a poller on a new job and poll it once while it runs; returns {poller, id, monitor, l (its lease)}. */
async function started(d, t, path) {
    const body = path === '/v1/jobs' ? { type: 'report.export', payload: { n: 1 } } : { n: 1 };
    let monitor;
    const poller = createHttpPoller(lro(d, t.keys.c, path, body), { withOperationLocation: (u) => { monitor ??= u; } });
    await poller.submitted();
    const id = monitor.match(/job_[A-Za-z0-9_-]+/)[0];
    const l = await leaseOne(t.w, 'report.export', { expectId: id });
    await poller.poll();
    assert.equal(poller.isDone, false, 'a running job is not done');
    return { poller, id, monitor, l };
}

const done = (poller) => poller.pollUntilDone({ abortSignal: AbortSignal.timeout(8000) });

describe('azure compatibility', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 4096, maxWaitSeconds: 15 }' }).replace('routes:', `routes:${ROUTES}`) });
    });
    after(() => d?.stop());

    for (const path of ['/v1/jobs', '/v1/azure']) {
        describe(`createHttpPoller through ${path}`, () => {
            it('ends on succeeded with the result', async () => {
                const t = tenant(d);
                const { poller, id, l } = await started(d, t, path);
                await complete(t.w, id, l.leaseId, { result: { url: 'https://example.com/r.csv' } });
                assert.deepEqual(await done(poller), { url: 'https://example.com/r.csv' });
            });

            it('ends on partialSuccess as success, the result and the flag kept', async () => {
                const t = tenant(d);
                const { poller, id, monitor, l } = await started(d, t, path);
                await complete(t.w, id, l.leaseId, { status: 'partialSuccess', result: { done: 2, failed: 1 } });
                assert.deepEqual(await done(poller), { done: 2, failed: 1 });
                const m = expectStatus(await t.c.get(new URL(monitor).pathname), 200).json;
                assert.equal(m.status, 'Succeeded');
                assert.equal(m.partialSuccess, true);
                assert.deepEqual(m.result, { done: 2, failed: 1 });
            });

            it('ends on failed with the error', async () => {
                const t = tenant(d);
                const { poller, id, l } = await started(d, t, path);
                await fail(t.w, id, l.leaseId, { error: { title: 'Boom', status: 500, detail: 'it broke', code: 'boom' }, retryable: false });
                await assert.rejects(done(poller), (e) => /boom/.test(e.message) && /it broke/.test(e.message));
            });

            it('ends on cancelled', async () => {
                const t = tenant(d);
                const { poller, id, l } = await started(d, t, path);
                const asked = await t.c.post(`/v1/jobs/${id}:cancel`, {});
                assert.ok(asked.status === 200 || asked.status === 202, `cancel: ${asked.status} ${asked.text}`);
                expectStatus(await t.w.post(`/v1/jobs/${id}:cancel`, { leaseId: l.leaseId }), 200);
                await assert.rejects(done(poller), /canceled/);
            });
        });
    }

    it('serves the monitor in the guidelines shape and sends Azure-AsyncOperation and 202 on the route', async () => {
        const t = tenant(d);
        const res = await submit(t.c, { n: 1 }, { path: '/v1/azure' });
        const id = res.json.id;
        assert.equal(hget(res, 'operation-location'), `${d.url}/v1/jobs/${id}/status`);
        assert.equal(hget(res, 'azure-asyncoperation'), `${d.url}/v1/jobs/${id}/status`);
        assert.equal(hget(res, 'location'), `/v1/jobs/${id}?onPending=accepted`);
        const pending = expectStatus(await t.c.get(hget(res, 'location')), 202);
        assert.equal(hget(pending, 'location'), `/v1/jobs/${id}?onPending=accepted`);
        assert.ok(Number(hget(pending, 'retry-after')) >= 1);
        const m = expectStatus(await t.c.get(`/v1/jobs/${id}/status`), 200);
        assert.equal(m.json.id, id);
        assert.equal(m.json.status, 'NotStarted');
        assert.ok(Number(hget(m, 'retry-after')) >= 1);
        assert.ok(!Number.isNaN(Date.parse(m.json.createdDateTime)));
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        expectStatus(await heartbeat(t.w, id, l.leaseId, { progress: 40 }), 200);
        const r = expectStatus(await t.c.get(`/v1/jobs/${id}/status?OnPending=Accepted`), 202).json;
        assert.equal(r.status, 'Running');
        assert.equal(r.percentComplete, 40);
        await complete(t.w, id, l.leaseId, { result: { ok: 1 } });
        expectStatus(await t.c.get(hget(res, 'location')), 200);
        const s = expectStatus(await t.c.get(`/v1/jobs/${id}/status`), 200).json;
        assert.equal(s.status, 'Succeeded');
        assert.equal(s.percentComplete, 100);
        assert.equal(s.resourceLocation, `${d.url}/v1/jobs/${id}/result`);
    });

    it('OnPending=Synchronous and ?until=done answer only when the job is final', async () => {
        const t = tenant(d);
        const id = (await submit(t.c)).json.id;
        const answered = [];
        const sync = t.c.get(`/v1/jobs/${id}?OnPending=Synchronous`).then((r) => { answered.push('sync'); return r; });
        const until = t.c.get(`/v1/jobs/${id}?until=done`).then((r) => { answered.push('until'); return r; });
        const change = t.c.get(`/v1/jobs/${id}?wait=15`);
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        assert.equal(expectStatus(await change, 200).json.status, 'running', 'a plain ?wait answers the change');
        expectStatus(await heartbeat(t.w, id, l.leaseId, { progress: 30 }), 200);
        await sleep(300);
        assert.deepEqual(answered, [], 'answered before the job was final');
        await complete(t.w, id, l.leaseId, { result: { sync: true } });
        for (const r of [await sync, await until]) {
            expectStatus(r, 200);
            assert.equal(r.json.status, 'succeeded');
            assert.deepEqual(r.json.result ?? { sync: true }, { sync: true });
        }
    });

    it('OnComplete=Stream answers the result, Redirect the 303, both case-insensitive', async () => {
        const t = tenant(d);
        const id = (await submit(t.c)).json.id;
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        await complete(t.w, id, l.leaseId, { result: { streamed: 1 } });
        assert.deepEqual(expectStatus(await t.c.get(`/v1/jobs/${id}?OnComplete=Stream`), 200).json, { streamed: 1 });
        assert.deepEqual(expectStatus(await t.c.get(`/v1/jobs/${id}?onComplete=stream`), 200).json, { streamed: 1 });
        const red = expectStatus(await t.c.get(`/v1/jobs/${id}?OnComplete=Redirect`), 303);
        assert.equal(hget(red, 'location'), `/v1/jobs/${id}/result`);
        assertProblem(await t.c.get(`/v1/jobs/${id}?OnPending=Later`), 400, 'invalid-request');
    });
});
