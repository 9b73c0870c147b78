// Bulk cancel and retry by filter: POST /v1/jobs:cancel and POST /v1/jobs:retry. Queued and running jobs (a worker
// sees the cancel request), matched against changed, the filters (status, createdBefore/After; type required), retries
// as new jobs with retryOf, the events on /v1/events and at a webhook receiver for each change, another tenant's jobs
// untouched, a walk of several pages, and the 400/422 answers with their pointers.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertProblem, expectStatus, getJob, heartbeat, listAll, runToCancelled, runToFailure, runToSuccess, sleep, submit,
    submitAndLease, waitUntil,
} from './lib/jobs.mjs';
import { openSse } from './lib/sse.mjs';
import { createEndpoint, startReceiver, stopClean, verifyDelivery, webhookConfig } from './lib/webhooks.mjs';

const auth = (key) => ({ authorization: `Bearer ${key}` });
const bulk = async (c, what, filter) => expectStatus(await c.post(`/v1/jobs:${what}`, filter), 200).json;

describe('bulk cancel and retry', () => {
    let d;
    let rx;
    before(async () => {
        d = await startDaemon({ config: webhookConfig() });
        rx = await startReceiver();
    });
    after(async () => {
        await rx.close();
        await stopClean(d);
    });

    it('cancels the queued and running jobs of a type: running ones get their cancel request, which the worker sees', async () => {
        const t = tenant(d);
        const other = tenant(d);
        const done = await runToSuccess(t.c, t.w);
        const l = await submitAndLease(t.c, t.w);
        const queued = [(await submit(t.c)).json.id, (await submit(t.c)).json.id];
        const otherType = (await submit(t.c, { type: 'image.resize', payload: {} })).json.id;
        const otherTenant = (await submit(other.c)).json.id;

        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export' }), { matched: 4, changed: 3 });
        for (const id of queued) assert.equal((await getJob(t.c, id)).status, 'cancelled');
        const running = await getJob(t.c, l.job.id);
        assert.equal(running.status, 'running');
        assert.equal(running.cancelRequested, true);
        const hb = expectStatus(await heartbeat(t.w, l.job.id, l.leaseId), 200);
        assert.equal(hb.json.cancelRequested, true, 'the worker hears of the cancel request');
        assert.equal((await getJob(t.c, done.id)).status, 'succeeded');
        assert.equal((await getJob(t.c, otherType)).status, 'queued');
        assert.equal((await getJob(other.c, otherTenant)).status, 'queued', "another tenant's job is untouched");
        assertProblem(await t.c.get(`/v1/jobs/${otherTenant}`), 404, 'not-found');

        // Again: the same jobs match, and nothing is left to change.
        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export' }), { matched: 4, changed: 0 });
        expectStatus(await t.w.post(`/v1/jobs/${l.job.id}:cancel`, { leaseId: l.leaseId }), 200);
        assert.equal((await getJob(t.c, l.job.id)).status, 'cancelled');
        // Nothing of the tenant matches another tenant's type filter.
        assert.deepEqual(await bulk(other.c, 'cancel', { type: 'email.send' }), { matched: 0, changed: 0 });
    });

    it('filters by status and by creation time', async () => {
        const t = tenant(d);
        const a = (await submit(t.c, { type: 'report.export', payload: {}, priority: 'low' })).json.id;
        await sleep(30);
        const mid = new Date().toISOString();
        await sleep(30);
        const l = await submitAndLease(t.c, t.w, { type: 'report.export', payload: {}, priority: 'high' });
        const b = (await submit(t.c)).json.id;

        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export', status: 'running' }), { matched: 1, changed: 1 });
        assert.equal((await getJob(t.c, a)).status, 'queued');
        assert.equal((await getJob(t.c, l.job.id)).cancelRequested, true);
        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export', createdBefore: mid }), { matched: 1, changed: 1 });
        assert.equal((await getJob(t.c, a)).status, 'cancelled');
        assert.equal((await getJob(t.c, b)).status, 'queued');
        // After mid: the running job (its cancel already asked for) and b; an array of statuses.
        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export', createdAfter: mid, status: ['queued', 'running'] }),
            { matched: 2, changed: 1 });
        assert.equal((await getJob(t.c, b)).status, 'cancelled');
        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export', status: 'succeeded' }), { matched: 0, changed: 0 });
    });

    it('retries the failed and cancelled jobs as new jobs with retryOf; the others are matched, not changed', async () => {
        const t = tenant(d);
        const failed = [await runToFailure(t.c, t.w), await runToFailure(t.c, t.w)];
        const cancelled = await runToCancelled(t.c);
        const ok = await runToSuccess(t.c, t.w);
        const queued = (await submit(t.c)).json.id;

        assert.deepEqual(await bulk(t.c, 'retry', { type: 'report.export', status: 'failed' }), { matched: 2, changed: 2 });
        let jobs = await listAll(t.c);
        let retries = jobs.filter((j) => j.retryOf !== null);
        assert.deepEqual(retries.map((j) => j.retryOf).sort(), failed.map((j) => j.id).sort());
        for (const j of retries) assert.equal(j.status, 'queued');
        for (const f of failed) assert.equal((await getJob(t.c, f.id)).status, 'failed', 'the original stays failed');

        // Without a status: every job of the type matches; the failed ones (again) and the cancelled one are retried.
        assert.deepEqual(await bulk(t.c, 'retry', { type: 'report.export' }), { matched: 7, changed: 3 });
        jobs = await listAll(t.c);
        retries = jobs.filter((j) => j.retryOf !== null);
        assert.equal(retries.length, 5);
        assert.equal(retries.filter((j) => j.retryOf === cancelled.id).length, 1);
        assert.equal(retries.filter((j) => j.retryOf === ok.id || j.retryOf === queued).length, 0);
    });

    it('each change is an event on /v1/events and a webhook delivery, as a single cancel or retry makes', async () => {
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/bulk-${t.name}`, ['job.cancelled', 'job.queued']);
        const failed = await runToFailure(t.c, t.w);
        const ids = [];
        for (let i = 0; i < 3; i++) ids.push((await submit(t.c, { type: 'email.send', payload: { i } })).json.id);
        const s = await openSse(`${d.url}/v1/events`, { headers: auth(t.keys.c) });
        assert.equal(s.status, 200);
        const at = () => rx.requests.filter((q) => q.path === `/bulk-${t.name}`).map((q) => verifyDelivery(q, hook.secret));
        await rx.waitFor(() => at().filter((e) => e.type === 'job.queued').length >= 4, { what: 'the submits\' job.queued' });

        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'email.send' }), { matched: 3, changed: 3 });
        await s.waitFor((x) => x.events.length >= 3, 10_000, 'three cancelled events');
        const seen = s.events.map((e) => JSON.parse(e.data));
        assert.deepEqual(seen.map((j) => j.id).sort(), [...ids].sort());
        assert.ok(seen.every((j) => j.status === 'cancelled'), JSON.stringify(seen));

        assert.deepEqual(await bulk(t.c, 'retry', { type: 'report.export' }), { matched: 1, changed: 1 });
        await s.waitFor((x) => x.events.length >= 4, 10_000, 'the retry\'s queued event');
        const retry = JSON.parse(s.events[3].data);
        assert.equal(retry.retryOf, failed.id);
        assert.equal(retry.status, 'queued');
        s.close();

        const url = (id) => `${d.url}/v1/jobs/${id}`;
        await rx.waitFor(() => at().length >= 4 + 3 + 1, { what: 'the bulk changes\' deliveries' });
        await sleep(300);
        const evs = at();
        assert.deepEqual(evs.filter((e) => e.type === 'job.cancelled').map((e) => e.data.job).sort(), ids.map(url).sort());
        assert.ok(evs.some((e) => e.type === 'job.queued' && e.data.job === url(retry.id)), JSON.stringify(evs));
        assert.equal(evs.length, 8, JSON.stringify(evs.map((e) => e.type)));
    });

    it('refuses a filter without a type, of the wrong types or with unknown members: 400/422 with pointers', async () => {
        const t = tenant(d);
        const id = (await submit(t.c)).json.id;
        const refused = async (what, body, pointers) => {
            const p = assertProblem(await t.c.post(`/v1/jobs:${what}`, body), 422, 'validation-failed');
            assert.deepEqual(p.errors.map((e) => e.pointer).sort(), [...pointers].sort(), JSON.stringify(p));
        };
        for (const what of ['cancel', 'retry']) {
            await refused(what, {}, ['/type']);
            await refused(what, { status: 'queued' }, ['/type']);
            await refused(what, { type: 5 }, ['/type']);
            await refused(what, { type: '' }, ['/type']);
            await refused(what, [], ['']);
            await refused(what, { type: 'report.export', status: 'bogus' }, ['/status']);
            await refused(what, { type: 'report.export', status: [] }, ['/status']);
            await refused(what, { type: 'report.export', status: ['queued', 7] }, ['/status']);
            await refused(what, { type: 'report.export', createdBefore: 'yesterday' }, ['/createdBefore']);
            await refused(what, { type: 'report.export', createdAfter: 17 }, ['/createdAfter']);
            await refused(what, { type: 'report.export', group: '' }, ['/group']);
            await refused(what, { type: 'report.export', group: 'x'.repeat(129) }, ['/group']);
            await refused(what, { type: 'report.export', group: 'a\u0001b' }, ['/group']);
            await refused(what, { type: 'report.export', jobs: [], 'a/b~': 1 }, ['/jobs', '/a~1b~0']);
            assertProblem(await t.c.req('POST', `/v1/jobs:${what}`, { raw: '{"type":' }), 400, 'malformed-json');
            assertProblem(await t.w.post(`/v1/jobs:${what}`, { type: 'report.export' }), 403, 'forbidden');
        }
        assert.equal((await getJob(t.c, id)).status, 'queued', 'a refused filter changes nothing');
        // A group of 128 characters is a group: none of this tenant's jobs is in it.
        assert.deepEqual(await bulk(t.c, 'retry', { type: 'report.export', group: 'g'.repeat(128) }), { matched: 0, changed: 0 });
    });

    it("acts on one group's jobs only when the filter names a group", async () => {
        const t = tenant(d);
        const inA = [(await submit(t.c, { type: 'report.export', payload: {}, group: 'customer-a' })).json.id,
            (await submit(t.c, { type: 'report.export', payload: {}, group: 'customer-a' })).json.id];
        const inB = (await submit(t.c, { type: 'report.export', payload: {}, group: 'customer-b' })).json.id;
        const none = (await submit(t.c)).json.id;
        assert.deepEqual(await bulk(t.c, 'cancel', { type: 'report.export', group: 'customer-a' }), { matched: 2, changed: 2 });
        for (const id of inA) assert.equal((await getJob(t.c, id)).status, 'cancelled');
        assert.equal((await getJob(t.c, inB)).status, 'queued');
        assert.equal((await getJob(t.c, none)).status, 'queued');
        const retried = await bulk(t.c, 'retry', { type: 'report.export', group: 'customer-a' });
        assert.deepEqual(retried, { matched: 2, changed: 2 });
        const again = (await listAll(t.c, { status: 'queued' })).filter((j) => inA.includes(j.retryOf));
        assert.equal(again.length, 2);
        for (const j of again) assert.equal(j.group, 'customer-a', 'a retry keeps the group');
    });
});

describe('bulk cancel over several pages', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }' }) });
    });
    after(() => stopClean(d));

    it('cancels every one of 700 queued jobs, a page at a time, and none of the jobs submitted after it', async () => {
        const t = tenant(d);
        const jobs = Array.from({ length: 350 }, (_, i) => ({ type: 'email.send', payload: { i } }));
        for (let k = 0; k < 2; k++) expectStatus(await t.c.post('/v1/jobs:batch', { jobs }, { headers: { prefer: 'return=minimal' } }), 207);
        const res = await bulk(t.c, 'cancel', { type: 'email.send' });
        assert.deepEqual(res, { matched: 700, changed: 700 });
        const all = await listAll(t.c, '?type=email.send');
        assert.equal(all.length, 700);
        assert.equal(all.filter((j) => j.status === 'cancelled').length, 700);
        const late = (await submit(t.c, { type: 'email.send', payload: {} })).json.id;
        assert.deepEqual(await bulk(t.c, 'retry', { type: 'email.send', status: 'cancelled' }), { matched: 700, changed: 700 });
        assert.equal((await getJob(t.c, late)).status, 'queued');
        assert.equal((await listAll(t.c, '?type=email.send&status=queued')).length, 701);
    });

    it('goes on to the end when its client goes away before the answer', async () => {
        const t = tenant(d);
        const jobs = Array.from({ length: 500 }, (_, i) => ({ type: 'email.send', payload: { i } }));
        for (let k = 0; k < 2; k++) expectStatus(await t.c.post('/v1/jobs:batch', { jobs }, { headers: { prefer: 'return=minimal' } }), 207);
        const body = JSON.stringify({ type: 'email.send' });
        const u = new URL(d.url);
        const sock = net.connect(Number(u.port), u.hostname);
        await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
        sock.write(`POST /v1/jobs:cancel HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${t.keys.c}\r\n`
            + `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        sock.destroy();
        await waitUntil(() => listAll(t.c, '?type=email.send&status=queued'), (l) => l.length === 0,
            { timeoutMs: 20_000, what: 'every job cancelled' });
        assert.equal((await listAll(t.c, '?type=email.send&status=cancelled')).length, 1000);
    });
});
