// The Google AIP-151 operations view: /v1/operations renders jobs as google.longrunning.Operation in proto3 JSON,
// checked field by field against google/longrunning/operations.proto (google-proto-files, loaded by protobufjs).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertProblem, assertStrongEtag, complete, expectStatus, fail, hget, leaseOne, mapLimit, show, submit, submitAndLease,
} from './lib/jobs.mjs';
import * as openapi from './lib/openapi.mjs';

const PROTO_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules', 'google-proto-files');
const root = new protobuf.Root();
root.resolvePath = (origin, target) => path.join(PROTO_DIR, target);
root.loadSync(['google/longrunning/operations.proto', 'google/protobuf/struct.proto', 'google/protobuf/duration.proto',
    'google/protobuf/timestamp.proto'], { keepCase: false });
root.resolveAll();

const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

/** Assert v is the proto3 JSON of a message of type t (a protobufjs Type): every key a field (by JSON name or
 * name), every value of the field's kind, an Any's @type resolving in root, a oneof holding at most one field. */
function checkMessage(t, v, where) {
    const name = t.fullName.replace(/^\./, '');
    switch (name) {
    case 'google.protobuf.Value': return;
    case 'google.protobuf.Struct':
        assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${where}: a Struct is a JSON object`);
        return;
    case 'google.protobuf.ListValue': assert.ok(Array.isArray(v), `${where}: a ListValue is an array`); return;
    case 'google.protobuf.Timestamp': assert.match(v, TS, where); return;
    case 'google.protobuf.Duration': assert.match(v, /^-?\d+(\.\d{1,9})?s$/, where); return;
    case 'google.protobuf.Empty': assert.deepEqual(v, {}, where); return;
    case 'google.protobuf.Any': {
        assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${where}: an Any is an object`);
        const url = v['@type'];
        assert.equal(typeof url, 'string', `${where}: an Any has @type`);
        const inner = root.lookupType(url.slice(url.lastIndexOf('/') + 1));
        const rest = { ...v };
        delete rest['@type'];
        const special = ['Value', 'Struct', 'ListValue', 'Timestamp', 'Duration', 'FieldMask', 'Empty']
            .map((s) => `google.protobuf.${s}`).includes(inner.fullName.replace(/^\./, '')) && inner.fullName !== '.google.protobuf.Empty';
        if (special) {
            assert.deepEqual(Object.keys(rest), ['value'], `${where}: an Any of ${url} carries exactly "value"`);
            checkMessage(inner, rest.value, `${where}.value`);
        } else {
            checkMessage(inner, rest, where);
        }
        return;
    }
    default: break;
    }
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${where}: ${name} is an object: ${JSON.stringify(v)}`);
    const byJson = new Map();
    for (const f of t.fieldsArray) {
        byJson.set(f.options?.json_name ?? f.name, f);
        byJson.set(f.name, f);
    }
    const oneofs = new Map();
    for (const [k, val] of Object.entries(v)) {
        const f = byJson.get(k);
        assert.ok(f, `${where}: ${name} has no field ${k}`);
        if (f.partOf) {
            assert.ok(!oneofs.has(f.partOf.name), `${where}: oneof ${f.partOf.name} holds ${oneofs.get(f.partOf.name)} and ${k}`);
            oneofs.set(f.partOf.name, k);
        }
        if (f.repeated) {
            assert.ok(Array.isArray(val), `${where}.${k} is repeated`);
            val.forEach((x, i) => checkValue(f, x, `${where}.${k}[${i}]`));
        } else {
            checkValue(f, val, `${where}.${k}`);
        }
    }
}

function checkValue(f, v, where) {
    if (f.resolvedType instanceof protobuf.Type) return checkMessage(f.resolvedType, v, where);
    if (f.resolvedType instanceof protobuf.Enum) {
        assert.ok(typeof v === 'string' ? v in f.resolvedType.values : Number.isInteger(v), where);
        return;
    }
    switch (f.type) {
    case 'string': assert.equal(typeof v, 'string', where); break;
    case 'bool': assert.equal(typeof v, 'boolean', where); break;
    case 'int32': case 'sint32': case 'uint32': case 'fixed32': case 'sfixed32':
        assert.ok(Number.isInteger(v) && Math.abs(v) < 2 ** 32, `${where}: ${v} is no ${f.type}`); break;
    case 'int64': case 'uint64': case 'sint64': case 'fixed64': case 'sfixed64':
        assert.ok(Number.isInteger(v) || /^-?\d+$/.test(v), where); break;
    case 'double': case 'float': assert.equal(typeof v, 'number', where); break;
    case 'bytes': assert.match(v, /^[A-Za-z0-9+/_-]*=*$/, where); break;
    default: assert.fail(`${where}: unexpected field type ${f.type}`);
    }
}

const Operation = root.lookupType('google.longrunning.Operation');
const ListResponse = root.lookupType('google.longrunning.ListOperationsResponse');

/** Assert op is a valid Operation for job id; returns its metadata (the Struct's value). */
function assertOperation(op, id) {
    checkMessage(Operation, op, 'Operation');
    assert.equal(Operation.verify(Operation.fromObject(op)), null);
    assert.equal(op.name, `operations/${id}`);
    assert.equal(typeof op.done, 'boolean');
    assert.equal(op.metadata['@type'], 'type.googleapis.com/google.protobuf.Struct');
    const m = op.metadata.value;
    assert.equal(m.id, id);
    assert.match(m.createTime, TS);
    assert.match(m.updateTime, TS);
    if (op.done) assert.ok(('response' in op) !== ('error' in op), `a done operation has response or error: ${JSON.stringify(op)}`);
    else assert.ok(!('response' in op) && !('error' in op), JSON.stringify(op));
    return m;
}

/** Every operation of ListOperations with filter, following nextPageToken (a filtered page may hold fewer). */
async function listOps(c, filter, pageSize = 100) {
    const ops = [];
    let token;
    for (let page = 0; page < 100; page++) {
        const q = new URLSearchParams({ filter, pageSize: String(pageSize) });
        if (token) q.set('pageToken', token);
        const res = expectStatus(await c.get(`/v1/operations?${q}`), 200);
        checkMessage(ListResponse, res.json, 'ListOperationsResponse');
        ops.push(...res.json.operations);
        token = res.json.nextPageToken;
        if (!token) return ops;
    }
    throw new Error('listOps: too many pages');
}

async function getOp(c, id) {
    const res = expectStatus(await c.get(`/v1/operations/${id}`), 200);
    assertOperation(res.json, id);
    return res;
}

describe('operations view (AIP-151)', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ routes: `
  - { method: POST, path: /v1/videos, type: video.transcode, resource: "/v1/videos/{id}", onComplete: redirect }
  - { method: POST, path: "/v1/videos:transcode", type: video.transcode, style: operation, resource: "/v1/videos/{id}" }` }) });
    });
    after(() => d?.stop());

    it('renders queued, running, succeeded, partialSuccess, failed and cancelled jobs as Operations', async () => {
        const { c, w } = tenant(d);
        const queued = (await submit(c, { type: 'email.send', payload: {} })).json.id;
        const m = assertOperation((await getOp(c, queued)).json, queued);
        assert.equal(m.status, 'queued');

        const run = await submitAndLease(c, w);
        expectStatus(await w.post(`/v1/jobs/${run.job.id}:heartbeat`, { leaseId: run.leaseId, progress: 40 }), 200);
        const running = (await getOp(c, run.job.id)).json;
        assert.equal(running.done, false);
        assert.equal(running.metadata.value.status, 'running');
        assert.equal(running.metadata.value.progress, 40);

        const ok = await submitAndLease(c, w);
        await complete(w, ok.job.id, ok.leaseId, { result: { url: 'https://example.com/out', n: [1, 2] } });
        const done = (await getOp(c, ok.job.id)).json;
        assert.equal(done.done, true);
        assert.deepEqual(done.response, { '@type': 'type.googleapis.com/google.protobuf.Value', value: { url: 'https://example.com/out', n: [1, 2] } });

        const part = await submitAndLease(c, w);
        await complete(w, part.job.id, part.leaseId, { result: { some: 1 }, status: 'partialSuccess' });
        const partial = (await getOp(c, part.job.id)).json;
        assert.equal(partial.done, true);
        assert.equal(partial.metadata.value.status, 'partialSuccess');
        assert.deepEqual(partial.response.value, { some: 1 });

        for (const [problem, code] of [[{ title: 'Boom', status: 500, detail: 'it broke' }, 13],
            [{ title: 'No such source', status: 404 }, 5], [{ title: 'Slow', status: 504 }, 4], [{ title: 'Odd', status: 418 }, 2]]) {
            const f = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 1 });
            await fail(w, f.job.id, f.leaseId, { error: problem, retryable: false });
            const op = (await getOp(c, f.job.id)).json;
            assert.equal(op.done, true);
            assert.equal(op.error.code, code, show({ status: 200, text: JSON.stringify(op) }));
            assert.equal(op.error.message, problem.detail ?? problem.title);
            assert.equal(op.error.details[0]['@type'], 'type.googleapis.com/google.protobuf.Struct');
            assert.equal(op.error.details[0].value.status, problem.status);
        }

        const cancelled = (await submit(c, { type: 'email.send', payload: {} })).json.id;
        expectStatus(await c.del(`/v1/jobs/${cancelled}`), 200);
        const cop = (await getOp(c, cancelled)).json;
        assert.equal(cop.done, true);
        assert.equal(cop.error.code, 1);
        assert.equal(cop.metadata.value.status, 'cancelled');
    });

    it('has a strong ETag of its own (If-None-Match → 304), the full name form, and signed URLs', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const res = await getOp(c, id);
        const etag = assertStrongEtag(res);
        assert.notEqual(etag, hget(await c.get(`/v1/jobs/${id}`), 'etag'));
        const again = await c.get(`/v1/operations/${id}`, { headers: { 'if-none-match': etag } });
        assert.equal(again.status, 304, again.text);
        const full = expectStatus(await c.get(`/v1/operations/operations/${id}`), 200);
        assert.deepEqual(full.json, res.json);
        const { url } = expectStatus(await c.post(`/v1/jobs/${id}:sign`, {}), 200).json;
        const u = new URL(url);
        const signedRes = await fetch(`${d.url}/v1/operations/${id}${u.search}`);
        const signedText = await signedRes.text();
        const violation = openapi.check({ method: 'GET', target: `/v1/operations/${id}${u.search}`, status: signedRes.status, headers: signedRes.headers, text: signedText });
        assert.equal(violation, null);
        const signed = expectStatus({ status: signedRes.status, json: JSON.parse(signedText), text: signedText }, 200);
        assert.equal(signed.json.name, `operations/${id}`);
    });

    it('lists 1,000 operations in pages of 100 with no duplicate or gap, and filters them', async () => {
        const { c, w } = tenant(d);
        const ids = await mapLimit(Array.from({ length: 1000 }, (_, i) => i), 32, async () => (await submit(c)).json.id);
        const seen = new Set();
        let token;
        let pages = 0;
        do {
            const q = new URLSearchParams({ pageSize: '100' });
            if (token) q.set('pageToken', token);
            const res = expectStatus(await c.get(`/v1/operations?${q}`), 200);
            checkMessage(ListResponse, res.json, 'ListOperationsResponse');
            assert.ok(res.json.operations.length <= 100);
            for (const op of res.json.operations) {
                const id = op.name.slice('operations/'.length);
                assert.ok(!seen.has(id), `duplicate ${id}`);
                seen.add(id);
            }
            token = res.json.nextPageToken;
            pages++;
            assert.ok(pages <= 11, 'too many pages');
        } while (token);
        assert.equal(seen.size, 1000);
        for (const id of ids) assert.ok(seen.has(id), `gap: ${id} not listed`);

        const l = await leaseOne(w, 'report.export');
        await complete(w, l.job.id, l.leaseId);
        assert.deepEqual((await listOps(c, 'done=true')).map((o) => o.name), [`operations/${l.job.id}`]);
        const notDone = await listOps(c, 'done = false', 1000);
        assert.equal(notDone.length, 999);
        assert.ok(notDone.every((o) => o.done === false));
        assert.deepEqual((await listOps(c, 'status="succeeded" AND done=true')).map((o) => o.name), [`operations/${l.job.id}`]);
        assert.equal((await listOps(c, 'status=queued')).length, 999);
        for (const bad of ['name="x"', 'done=maybe', 'status="nope"', 'done=true OR done=false', 'done=true AND']) {
            assertProblem(await c.get(`/v1/operations?filter=${encodeURIComponent(bad)}`), 400, 'invalid-request');
        }
        assertProblem(await c.get('/v1/operations?pageSize=1001'), 400, 'invalid-request');
        assertProblem(await c.get('/v1/operations?pageToken=bogus'), 400, 'invalid-request');
    });

    it(':wait answers when the job ends, and at the timeout when it does not', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const pending = c.post(`/v1/operations/${id}:wait`, { timeout: '5s' });
        const l = await leaseOne(w, 'report.export', { expectId: id });
        await complete(w, id, l.leaseId, { result: { waited: true } });
        const res = expectStatus(await pending, 200);
        assertOperation(res.json, id);
        assert.equal(res.json.done, true);
        assert.deepEqual(res.json.response.value, { waited: true });

        const other = (await submit(c, { type: 'email.send', payload: {} })).json.id;
        const timedOut = expectStatus(await c.post(`/v1/operations/${other}:wait`, { timeout: '0.5s' }), 200);
        assertOperation(timedOut.json, other);
        assert.equal(timedOut.json.done, false);
        assertProblem(await c.post(`/v1/operations/${other}:wait`, { timeout: '30' }), 400, 'invalid-request');
        assertProblem(await c.post(`/v1/operations/${other}:wait`, { timeout: 30 }), 400, 'invalid-request');
    });

    it(':cancel and DELETE answer Empty; the operation then ends CANCELLED', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c)).json.id;
        assert.deepEqual(expectStatus(await c.post(`/v1/operations/${a}:cancel`), 200).json, {});
        const op = (await getOp(c, a)).json;
        assert.equal(op.done, true);
        assert.equal(op.error.code, 1);
        assertProblem(await c.post(`/v1/operations/${a}:cancel`), 409, 'illegal-transition');

        const run = await submitAndLease(c, w);
        assert.deepEqual(expectStatus(await c.post(`/v1/operations/operations/${run.job.id}:cancel`), 200).json, {});
        assert.equal((await getOp(c, run.job.id)).json.metadata.value.cancelRequested, true);

        const b = (await submit(c)).json.id;
        assert.deepEqual(expectStatus(await c.del(`/v1/operations/${b}`), 200).json, {});
        assert.equal((await getOp(c, b)).json.error.code, 1);
        assert.deepEqual(expectStatus(await c.del(`/v1/operations/${b}`), 200).json, {});
        assertProblem(await w.post(`/v1/operations/${b}:cancel`), 403, 'forbidden');
    });

    it('a route with style: operation answers 200 with the Operation', async () => {
        const { c, w } = tenant(d);
        const res = expectStatus(await c.post('/v1/videos:transcode', { sourceUrl: 'https://example.com/a.mp4' }), 200);
        const id = res.json.name.slice('operations/'.length);
        const m = assertOperation(res.json, id);
        assert.equal(m.type, 'video.transcode');
        assert.equal(res.json.done, false);
        assert.equal(hget(res, 'location'), `/v1/operations/${id}`);
        assert.equal(hget(res, 'content-location'), `/v1/videos/${id}`);
        assert.equal(hget(res, 'etag'), hget(await c.get(`/v1/operations/${id}`), 'etag'));
        const l = await leaseOne(w, 'video.transcode', { expectId: id });
        assert.deepEqual(l.job.payload, { sourceUrl: 'https://example.com/a.mp4' });
        const again = expectStatus(await c.post('/v1/videos:transcode', { sourceUrl: 'https://example.com/b.mp4' }, { headers: { 'idempotency-key': 'op-1' } }), 200);
        const replay = expectStatus(await c.post('/v1/videos:transcode', { sourceUrl: 'https://example.com/b.mp4' }, { headers: { 'idempotency-key': 'op-1' } }), 200);
        assert.equal(replay.json.name, again.json.name);
        assert.equal(hget(replay, 'idempotent-replayed'), 'true');
        expectStatus(await c.post('/v1/videos', { sourceUrl: 'https://example.com/c.mp4' }), 202);
    });

    it("another tenant's key gets 404 and does not list the operation", async () => {
        const { c } = tenant(d);
        const other = tenant(d);
        const id = (await submit(c)).json.id;
        assertProblem(await other.c.get(`/v1/operations/${id}`), 404, 'not-found');
        assertProblem(await other.c.post(`/v1/operations/${id}:cancel`), 404, 'not-found');
        assertProblem(await other.c.del(`/v1/operations/${id}`), 404, 'not-found');
        assertProblem(await other.c.post(`/v1/operations/${id}:wait`, { timeout: '1s' }), 404, 'not-found');
        assert.deepEqual(expectStatus(await other.c.get('/v1/operations'), 200).json, { operations: [] });
        assert.equal((await getOp(c, id)).json.done, false);
        assertProblem(await c.get('/v1/operations/job_nope'), 404, 'not-found');
    });
});
