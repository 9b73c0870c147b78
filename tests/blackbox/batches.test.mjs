// Batches (CONTRACT §13): POST /v1/batches stores 1 to 1,000 jobs in one commit or none; GET /v1/batches/{id}
// answers the jobs counted by status with ETag/304 and Retry-After while running; the status rules; the jobs
// listing; :cancel; tenant isolation; a job that depends on a batch (fan-in); and a kill -9 right after the last
// job's completion: the batch has ended, once. On SQLite and, under `make blackbox-pg`, PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, fail, getJob, hget, lease, leaseOne, listAll, show, sleep } from './lib/jobs.mjs';
import { createEndpoint, startReceiver, verifyDelivery, webhookConfig, WEBHOOK_VERSION } from './lib/webhooks.mjs';
import { openSse } from './lib/sse.mjs';

// google/longrunning/operations.proto (google-proto-files), for the AIP-151 view of a batch.
const PROTO_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules', 'google-proto-files');
const root = new protobuf.Root();
root.resolvePath = (origin, target) => path.join(PROTO_DIR, target);
root.loadSync(['google/longrunning/operations.proto', 'google/protobuf/struct.proto'], { keepCase: false });
root.resolveAll();

/** Assert op is the proto3 JSON of a google.longrunning.Operation: its keys are the message's fields, the Anys
 * resolve to well-known types carrying "value", error is a google.rpc.Status, and one result at most. */
function assertOperation(op) {
    const t = root.lookupType('google.longrunning.Operation');
    const names = new Set(t.fieldsArray.flatMap((f) => [f.name, f.options?.json_name].filter(Boolean)));
    for (const k of Object.keys(op)) assert.ok(names.has(k), `Operation has no field ${k}`);
    assert.equal(typeof op.name, 'string');
    assert.equal(typeof op.done, 'boolean');
    for (const any of [op.metadata, op.response].filter(Boolean)) {
        const inner = root.lookupType(any['@type'].slice(any['@type'].lastIndexOf('/') + 1));
        assert.ok(['google.protobuf.Struct', 'google.protobuf.Value'].includes(inner.fullName.slice(1)));
        assert.deepEqual(Object.keys(any).sort(), ['@type', 'value']);
    }
    assert.ok(!(op.response && op.error), 'result is a oneof');
    if (op.error) {
        const st = root.lookupType('google.rpc.Status');
        for (const k of Object.keys(op.error)) assert.ok(st.fields[k], `Status has no field ${k}`);
        assert.equal(typeof op.error.code, 'number');
    }
}

const create = async (c, jobs) => expectStatus(await c.post('/v1/batches', { jobs }), 202);
const getBatch = async (c, id) => expectStatus(await c.get(`/v1/batches/${id}`), 200);
const noLease = async (w, types) => expectStatus(await lease(w, types, { wait: 0 }), 204);

/** Lease every job of type and end each as outcome(i) says ('ok', 'partial', 'fail'). */
async function runAll(w, type, n, outcome) {
    for (let i = 0; i < n; i++) {
        const l = await leaseOne(w, type);
        const how = outcome(i);
        if (how === 'fail') await fail(w, l.job.id, l.leaseId, { retryable: false });
        else await complete(w, l.job.id, l.leaseId, how === 'partial' ? { status: 'partialSuccess', result: {} } : { result: { i } });
    }
}

describe('batches', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a batch is created in one commit, read with ETag/304 and Retry-After, and ends succeeded', async () => {
        const { c, w } = tenant(d);
        const res = await create(c, [1, 2, 3].map((n) => ({ type: 'report.export', payload: { n } })));
        const b = res.json;
        assert.match(b.id, /^bat_[A-Za-z0-9_-]{28}$/);
        assert.equal(hget(res, 'location'), `/v1/batches/${b.id}`);
        assert.equal(b.status, 'running');
        assert.equal(b.total, 3);
        assert.deepEqual(b.counts, { queued: 3, running: 0, succeeded: 0, partialSuccess: 0, failed: 0, cancelled: 0 });
        assert.equal(b.progress, 0);
        assert.equal(b.finishedAt, null);
        const r1 = await getBatch(c, b.id);
        assert.ok(hget(r1, 'etag'), 'a strong ETag');
        assert.ok(Number(hget(r1, 'retry-after')) >= 1, 'Retry-After while running');
        const nm = await c.get(`/v1/batches/${b.id}`, { headers: { 'if-none-match': hget(r1, 'etag') } });
        assert.equal(nm.status, 304, show(nm));
        assert.ok(hget(nm, 'retry-after'));
        // Its jobs name it, and are listed, paged.
        const p1 = expectStatus(await c.get(`/v1/batches/${b.id}/jobs?limit=2`), 200).json;
        assert.equal(p1.items.length, 2);
        assert.ok(p1.nextPageToken);
        const p2 = expectStatus(await c.get(`/v1/batches/${b.id}/jobs?limit=2&pageToken=${p1.nextPageToken}`), 200).json;
        assert.equal(p2.items.length, 1);
        assert.equal(p2.nextPageToken, null);
        const ids = [...p1.items, ...p2.items].map((j) => j.id);
        assert.equal(new Set(ids).size, 3);
        for (const id of ids) assert.equal((await getJob(c, id)).batchId, b.id);
        const l = await leaseOne(w, 'report.export');
        const mid = (await getBatch(c, b.id)).json;
        assert.equal(mid.counts.running, 1, JSON.stringify(mid));
        assert.equal(mid.counts.queued, 2);
        const nm2 = await c.get(`/v1/batches/${b.id}`, { headers: { 'if-none-match': hget(r1, 'etag') } });
        assert.equal(nm2.status, 200, 'a change changes the ETag');
        await complete(w, l.job.id, l.leaseId);
        await runAll(w, 'report.export', 2, () => 'ok');
        const end = await getBatch(c, b.id);
        assert.equal(end.json.status, 'succeeded', JSON.stringify(end.json));
        assert.equal(end.json.progress, 100);
        assert.deepEqual(end.json.counts, { queued: 0, running: 0, succeeded: 3, partialSuccess: 0, failed: 0, cancelled: 0 });
        assert.ok(end.json.finishedAt);
        assert.equal(hget(end, 'retry-after') ?? null, null, 'no Retry-After once final');
    });

    it('the status rules: partialSuccess, failed, cancelled', async () => {
        const { c, w } = tenant(d);
        const mixed = (await create(c, [1, 2, 3].map(() => ({ type: 'email.send', maxAttempts: 1 })))).json;
        await runAll(w, 'email.send', 3, (i) => (i === 0 ? 'fail' : i === 1 ? 'partial' : 'ok'));
        const m = (await getBatch(c, mixed.id)).json;
        assert.equal(m.status, 'partialSuccess', JSON.stringify(m));
        assert.deepEqual(m.counts, { queued: 0, running: 0, succeeded: 1, partialSuccess: 1, failed: 1, cancelled: 0 });
        const onlyPartial = (await create(c, [{ type: 'email.send' }])).json;
        await runAll(w, 'email.send', 1, () => 'partial');
        assert.equal((await getBatch(c, onlyPartial.id)).json.status, 'partialSuccess', 'partial is not all succeeded');
        const failed = (await create(c, [1, 2].map(() => ({ type: 'email.send', maxAttempts: 1 })))).json;
        const l = await leaseOne(w, 'email.send');
        await fail(w, l.job.id, l.leaseId, { retryable: false });
        const other = (await getBatch(c, failed.id)).json;
        assert.equal(other.status, 'running');
        const rest = expectStatus(await c.get(`/v1/batches/${failed.id}/jobs`), 200).json.items.find((j) => j.status === 'queued');
        expectStatus(await c.del(`/v1/jobs/${rest.id}`), 200);
        assert.equal((await getBatch(c, failed.id)).json.status, 'failed', 'none succeeded: failed, even with one cancelled');
        const cancelled = (await create(c, [1, 2].map(() => ({ type: 'email.send' })))).json;
        const cres = expectStatus(await c.post(`/v1/batches/${cancelled.id}:cancel`, {}), 200);
        assert.equal(cres.json.status, 'cancelled', show(cres));
        assert.deepEqual(cres.json.counts, { queued: 0, running: 0, succeeded: 0, partialSuccess: 0, failed: 0, cancelled: 2 });
        await noLease(w, 'email.send');
    });

    it(':cancel cancels the queued jobs and asks the running ones to stop', async () => {
        const { c, w } = tenant(d);
        const b = (await create(c, [1, 2, 3].map(() => ({ type: 'image.resize' })))).json;
        const l = await leaseOne(w, 'image.resize');
        const res = expectStatus(await c.post(`/v1/batches/${b.id}:cancel`, {}), 200);
        assert.equal(res.json.status, 'running', 'one job still runs');
        assert.equal(res.json.counts.cancelled, 2);
        assert.equal((await getJob(c, l.job.id)).cancelRequested, true);
        expectStatus(await w.post(`/v1/jobs/${l.job.id}:cancel`, { leaseId: l.leaseId }), 200);
        assert.equal((await getBatch(c, b.id)).json.status, 'cancelled');
    });

    it('refuses a batch whole: nothing of it is stored; pointers into /jobs/N', async () => {
        const { c, w } = tenant(d);
        for (const [body, pointer] of [
            [{ jobs: [] }, '/jobs'],
            [{ jobs: [{ type: 'report.export' }, { payload: {} }] }, '/jobs/1/type'],
            [{ jobs: [{ type: 'report.export', priority: 'urgent' }] }, '/jobs/0/priority'],
            [{ jobs: [{ type: 'report.export', uniqueKey: 'k' }] }, '/jobs/0/uniqueKey'],
            [{ jobs: [{ type: 'report.export', dependsOn: [] }] }, '/jobs/0/dependsOn'],
        ]) {
            const res = await c.post('/v1/batches', body);
            assertProblem(res, 422, 'validation-failed');
            assert.ok(res.json.errors.some((e) => e.pointer === pointer), `${pointer}: ${show(res)}`);
        }
        const unknown = await c.post('/v1/batches', { jobs: [{ type: 'report.export' }, { type: 'report.export', dependsOn: ['job_nope'] }] });
        assertProblem(unknown, 422, 'dependency-unknown');
        assert.deepEqual(unknown.json.errors.map((e) => e.pointer), ['/jobs/1/dependsOn/0']);
        assert.equal((await listAll(c)).length, 0, 'nothing of a refused batch is stored');
        await noLease(w, 'report.export');
    });

    it('another tenant\'s batch is not found, and cannot be depended on', async () => {
        const { c } = tenant(d);
        const { c: other } = tenant(d);
        const b = (await create(c, [{ type: 'report.export' }])).json;
        assertProblem(await other.get(`/v1/batches/${b.id}`), 404, 'not-found');
        assertProblem(await other.get(`/v1/batches/${b.id}/jobs`), 404, 'not-found');
        assertProblem(await other.post(`/v1/batches/${b.id}:cancel`, {}), 404, 'not-found');
        assertProblem(await other.post('/v1/jobs', { type: 'report.export', dependsOn: [b.id] }), 422, 'dependency-unknown');
        assert.equal((await getBatch(c, b.id)).json.status, 'running');
    });

    it('fan-in: a job that depends on a batch runs after all its parts; a failed batch cancels it', async () => {
        const { c, w } = tenant(d);
        const parts = (await create(c, [1, 2, 3].map((n) => ({ type: 'image.resize', payload: { n } })))).json;
        const report = expectStatus(await c.post('/v1/jobs', { type: 'email.send', dependsOn: [parts.id] }), 202).json;
        assert.equal(report.waitingFor, 'dependencies');
        await runAll(w, 'image.resize', 2, () => 'ok');
        await noLease(w, 'email.send');
        await runAll(w, 'image.resize', 1, () => 'partial');
        const lr = await leaseOne(w, 'email.send', { expectId: report.id });
        assert.deepEqual(lr.job.dependsOn, [parts.id]);
        await complete(w, report.id, lr.leaseId);
        const bad = (await create(c, [{ type: 'image.resize', maxAttempts: 1 }])).json;
        const after = expectStatus(await c.post('/v1/jobs', { type: 'email.send', dependsOn: [bad.id] }), 202).json;
        await runAll(w, 'image.resize', 1, () => 'fail');
        const now = await getJob(c, after.id);
        assert.equal(now.status, 'cancelled', JSON.stringify(now));
        assert.equal(now.error.dependency, bad.id);
    });
});

describe('the event stream of a batch', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('sends the state on every change of its jobs, resumes with the current state, ends with done', async () => {
        const { c, w, keys } = tenant(d);
        const { keys: otherKeys } = tenant(d);
        const b = (await create(c, [1, 2].map(() => ({ type: 'report.export' })))).json;
        const url = `${d.url}/v1/batches/${b.id}/events`;
        const auth = { authorization: `Bearer ${keys.c}` };
        const s1 = await openSse(url, { headers: auth });
        assert.equal(s1.status, 200);
        await s1.waitEvents(1);
        assert.deepEqual([s1.events[0].event, s1.events[0].id], ['batch', '0']);
        assert.equal(JSON.parse(s1.events[0].data).counts.queued, 2);
        const l1 = await leaseOne(w, 'report.export');
        await complete(w, l1.job.id, l1.leaseId);
        await s1.waitFor((x) => x.events.some((e) => JSON.parse(e.data).counts.succeeded === 1), 10_000, 'the first job\'s end');
        const last = s1.events[s1.events.length - 1];
        assert.equal(last.id, '1', 'the id counts the jobs that ended');
        s1.close();
        // The second job ends while no stream is open; a resume gets the state as it is now, then done.
        const l2 = await leaseOne(w, 'report.export');
        await complete(w, l2.job.id, l2.leaseId);
        const s2 = await openSse(url, { headers: { ...auth, 'last-event-id': '1' } });
        await s2.waitEnd();
        assert.deepEqual(s2.events.map((e) => [e.event, e.id]), [['done', '3']]);
        assert.equal(JSON.parse(s2.events[0].data).status, 'succeeded');
        const s3 = await openSse(url, { headers: { ...auth, 'last-event-id': '3' } });
        assert.equal(s3.status, 204, 'past done: nothing more');
        s3.close();
        const s4 = await openSse(url, { headers: { authorization: `Bearer ${otherKeys.c}` } });
        assert.equal(s4.status, 404);
        s4.close();
    });

    it('a stream open while the last job ends gets done and ends', async () => {
        const { c, w, keys } = tenant(d);
        const b = (await create(c, [{ type: 'email.send', maxAttempts: 1 }])).json;
        const s = await openSse(`${d.url}/v1/batches/${b.id}/events`, { headers: { authorization: `Bearer ${keys.c}` } });
        await s.waitEvents(1);
        const l = await leaseOne(w, 'email.send');
        await fail(w, l.job.id, l.leaseId, { retryable: false });
        await s.waitEnd();
        const done = s.events[s.events.length - 1];
        assert.deepEqual([done.event, done.id], ['done', '2']);
        assert.equal(JSON.parse(done.data).status, 'failed');
    });
});

describe('the AIP-151 view of a batch', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('GET /v1/operations/{batch id} is the batch as a google.longrunning.Operation, with its own ETag', async () => {
        const { c, w } = tenant(d);
        const { c: other } = tenant(d);
        const b = (await create(c, [1, 2].map(() => ({ type: 'report.export' })))).json;
        const r1 = expectStatus(await c.get(`/v1/operations/${b.id}`), 200);
        assertOperation(r1.json);
        assert.equal(r1.json.name, `operations/${b.id}`);
        assert.equal(r1.json.done, false);
        assert.equal(r1.json.metadata.value.total, 2);
        assert.equal(r1.json.response, undefined);
        assert.equal((await c.get(`/v1/operations/${b.id}`, { headers: { 'if-none-match': hget(r1, 'etag') } })).status, 304);
        assertProblem(await other.get(`/v1/operations/${b.id}`), 404, 'not-found');
        await runAll(w, 'report.export', 2, (i) => (i === 0 ? 'ok' : 'partial'));
        const r2 = expectStatus(await c.get(`/v1/operations/${b.id}`, { headers: { 'if-none-match': hget(r1, 'etag') } }), 200);
        assertOperation(r2.json);
        assert.equal(r2.json.done, true);
        assert.deepEqual(r2.json.response.value, { status: 'partialSuccess' });
        assert.equal(r2.json.metadata.value.counts.partialSuccess, 1);
        const bad = (await create(c, [{ type: 'report.export' }])).json;
        expectStatus(await c.post(`/v1/batches/${bad.id}:cancel`, {}), 200);
        const r3 = expectStatus(await c.get(`/v1/operations/${bad.id}`), 200).json;
        assertOperation(r3);
        assert.equal(r3.done, true);
        assert.equal(r3.error.code, 1, 'CANCELLED');
    });
});

describe('batches across a kill -9', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('killed right after its last job completed, the batch has ended, once, and released its dependent once', async () => {
        const { c, w } = tenant(d);
        const b = (await create(c, [1, 2].map(() => ({ type: 'report.export' })))).json;
        const dep = expectStatus(await c.post('/v1/jobs', { type: 'email.send', dependsOn: [b.id] }), 202).json;
        await runAll(w, 'report.export', 1, () => 'ok');
        const l = await leaseOne(w, 'report.export');
        await complete(w, l.job.id, l.leaseId);
        await d.kill9();
        await d.restart();
        const end = (await getBatch(c, b.id)).json;
        assert.equal(end.status, 'succeeded', JSON.stringify(end));
        assert.deepEqual(end.counts, { queued: 0, running: 0, succeeded: 2, partialSuccess: 0, failed: 0, cancelled: 0 });
        const lr = await leaseOne(w, 'email.send', { expectId: dep.id });
        await complete(w, dep.id, lr.leaseId);
        await noLease(w, ['email.send', 'report.export']);
        assert.equal((await getBatch(c, b.id)).json.finishedAt, end.finishedAt, 'the batch ended once');
    });
});

describe('batch webhooks', () => {
    let d, rx;
    before(async () => {
        rx = await startReceiver();
        d = await startDaemon({ config: webhookConfig() });
    });
    after(async () => {
        await d?.stop();
        await rx?.close();
    });
    const at = (p) => rx.requests.filter((q) => q.path === p);

    it('one signed event per batch, to its callbackUrl and the endpoints that list it, across a kill -9', async () => {
        const { c, w, name } = tenant(d);
        const hook = await createEndpoint(c, `${rx.url}/hook-${name}`, ['batch.succeeded', 'batch.partialSuccess', 'batch.failed', 'batch.cancelled']);
        const jobsOnly = await createEndpoint(c, `${rx.url}/jobs-${name}`);
        assert.deepEqual(jobsOnly.events.filter((e) => e.startsWith('batch.')), [], 'batch events are opt-in');
        assertProblem(await c.post('/v1/batches', { jobs: [{ type: 'report.export' }], callbackUrl: `${rx.url}/cb-${name}` }), 422, 'callback-secret-missing');
        const secret = expectStatus(await c.post('/v1/webhooks/callback:rotate', {}), 200).json.secret;
        const res = expectStatus(await c.post('/v1/batches', { jobs: [{ type: 'report.export' }, { type: 'report.export' }], callbackUrl: `${rx.url}/cb-${name}` }), 202);
        const id = res.json.id;
        await runAll(w, 'report.export', 1, () => 'ok');
        const l = await leaseOne(w, 'report.export');
        await complete(w, l.job.id, l.leaseId);
        // Killed right after the last completion: the event was stored with it, and is sent after the restart.
        await d.kill9();
        await d.restart();
        await rx.waitFor(() => at(`/cb-${name}`).length >= 1 && at(`/hook-${name}`).length >= 1, { what: 'batch events' });
        await sleep(500);
        // One event each (a delivery in flight at the kill may be sent again after the restart: the same event, which
        // its Idempotency-Key lets the receiver drop).
        const cb = at(`/cb-${name}`);
        const hk = at(`/hook-${name}`);
        assert.equal(new Set(cb.map((q) => q.headers['webhook-id'])).size, 1, 'exactly one event to the callbackUrl');
        assert.equal(new Set(hk.map((q) => q.headers['webhook-id'])).size, 1, 'exactly one event to the endpoint');
        const e1 = verifyDelivery(cb[0], secret);
        const e2 = verifyDelivery(hk[0], hook.secret);
        for (const [ev, q] of [[e1, cb[0]], [e2, hk[0]]]) {
            assert.equal(ev.type, 'batch.succeeded');
            assert.equal(ev.version, WEBHOOK_VERSION);
            assert.deepEqual(Object.keys(ev.data), ['batch']);
            assert.equal(new URL(ev.data.batch).pathname, `/v1/batches/${id}`, 'made before the restart: the old port');
            assert.equal(q.headers['idempotency-key'], ev.id);
            assert.match(ev.id, /^evt_/);
        }
        assert.equal(e1.id, e2.id, 'one event, every destination');
        assert.ok(at(`/jobs-${name}`).every((q) => !JSON.parse(q.body).type.startsWith('batch.')), 'the default filter has no batch events');
    });
});
