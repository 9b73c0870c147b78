// Result artifacts (issue 42): a job's result as a file. A worker PUTs it to /v1/jobs/{id}/result in parts
// under its lease (Upload-Offset / Upload-Complete, Content-Digest, Repr-Digest), completes with
// {"artifact": true}, and clients download it with ranges, conditional requests and signed URLs. Uploads
// that never complete (cut off, lease lost, daemon killed) are never visible and the collector removes their
// files; retention removes the bytes of an expired job.
//
//   ACCEPTD_TEST_ARTIFACT_MB  size of the big artifact (default 1024: 1 GiB in 4 MiB parts)

import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, api, rawRequest, backend } from './lib/daemon.mjs';
import * as openapi from './lib/openapi.mjs';
import { openSse } from './lib/sse.mjs';
import { HTTP_DATE, assertJobShape, assertProblem, expectStatus, getJob, hget, leaseOne, show, sleep, submit, waitUntil } from './lib/jobs.mjs';
import { KiB, MiB, PART_CAP, artifactsConf, bin, config, digestOf, patterned, putPart, sha256hex, stopClean, upload } from './lib/artifacts.mjs';

const RESULT_CAP = 4 * MiB; // limits.maxResultBytes of the main daemon
const URL_SECONDS = 2; // the signed URL lifetime of the main daemon
// Under a sanitizer the RSS bound is not checked (its allocator is not the daemon's), so a smaller transfer does.
const BIG_MB = Number(process.env.ACCEPTD_TEST_ARTIFACT_MB ?? (process.env.ACCEPTD_SANITIZED ? 256 : 1024));

// The files of an artifact are on the node's disk with the SQLite store; with PostgreSQL (cluster mode) they are
// rows of the database, and the checks of <dataDir>/artifacts are left out.
const ON_DISK = backend === 'sqlite';

/** Files under <dataDir>/artifacts/<id> ([] when the directory is not there). */
function artifactFiles(d, id) {
    try {
        return fs.readdirSync(path.join(d.dataDir, 'artifacts', id));
    } catch (e) {
        if (e.code === 'ENOENT') return [];
        throw e;
    }
}

function rssKiB(pid) {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
}

describe('result artifacts', () => {
    let d;
    const W = () => 'wa';
    before(async () => {
        d = await startDaemon({
            config: config({
                limits: `{ maxBodyBytes: 4096, maxWaitSeconds: 5, maxUploadPartBytes: ${PART_CAP}, maxResultBytes: ${RESULT_CAP} }`,
                artifacts: artifactsConf({ gc: 1, url: URL_SECONDS }),
            }),
        });
    });
    after(() => d && stopClean(d));

    async function started(type, { leaseSeconds = 30 } = {}) {
        const c = api(d, 'ka');
        const id = (await submit(c, { type, payload: {} })).json.id;
        const l = await leaseOne(api(d, W()), type, { expectId: id, leaseSeconds });
        return { id, leaseId: l.leaseId };
    }

    async function withArtifact(type, data, contentType = 'application/octet-stream') {
        const { id, leaseId } = await started(type);
        await upload(d, 'wa', id, leaseId, data, { contentType });
        const job = expectStatus(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 200).json;
        return { id, leaseId, job };
    }

    it('upload in parts, complete with artifact: true, download the same bytes with their headers; HEAD has them without a body', async () => {
        const data = patterned(2 * MiB + 12345, 7);
        const { id, leaseId } = await started('art.basic');
        // The first part names the type; later parts say octet-stream and must not change it.
        const res = await upload(d, 'wa', id, leaseId, data, { contentType: 'application/x-tar' });
        assert.equal(res.json?.size, data.length, show(res));
        assert.equal(res.json?.contentType, 'application/x-tar', show(res));
        assert.equal(res.json?.digest, digestOf(data), show(res));
        assert.equal(hget(res, 'upload-offset'), String(data.length), show(res));
        assert.equal(hget(res, 'repr-digest'), digestOf(data), show(res));

        // Uploaded but not completed: no client sees it.
        const early = await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`);
        assertProblem(early, 404, 'result-not-ready');
        assert.equal((await getJob(api(d, 'ka'), id)).artifact, undefined);

        const job = expectStatus(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 200).json;
        assert.equal(job.status, 'succeeded');
        const want = { size: data.length, contentType: 'application/x-tar', digest: digestOf(data), href: `/v1/jobs/${id}/result` };
        assert.deepEqual(job.artifact, want, JSON.stringify(job));
        const read = await getJob(api(d, 'ka'), id);
        assertJobShape(read);
        assert.deepEqual(read.artifact, want);
        // The done event of the job's stream carries it too (webhooks send the same job view).
        const sse = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { authorization: 'Bearer ka' } });
        try {
            await sse.waitFor((c) => c.events.some((e) => e.event === 'done'), 10_000, 'the done event');
            const done = JSON.parse(sse.events.find((e) => e.event === 'done').data);
            assert.deepEqual(done.artifact, want, JSON.stringify(done));
        } finally {
            sse.close();
        }

        const got = expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 200);
        assert.equal(got.buf.length, data.length);
        assert.equal(sha256hex(got.buf), sha256hex(data), 'downloaded bytes differ');
        assert.equal(hget(got, 'content-type'), 'application/x-tar');
        assert.equal(hget(got, 'content-length'), String(data.length));
        assert.equal(hget(got, 'repr-digest'), digestOf(data));
        assert.equal(hget(got, 'accept-ranges'), 'bytes');

        const head = expectStatus(await bin(d, 'ka', 'HEAD', `/v1/jobs/${id}/result`), 200);
        assert.equal(head.buf.length, 0, 'HEAD has a body');
        for (const h of ['content-type', 'content-length', 'etag', 'repr-digest', 'accept-ranges']) {
            assert.equal(hget(head, h), hget(got, h), `HEAD ${h}`);
        }
        // The files on disk: the done artifact of that lease, nothing left receiving.
        if (ON_DISK) {
            assert.deepEqual(artifactFiles(d, id).filter((f) => f.endsWith('.part')), []);
            assert.ok(artifactFiles(d, id).includes(leaseId), `artifacts/${id}: ${artifactFiles(d, id)}`);
        }
        // Last: Last-Modified, and the entity tag is the SHA-256 in hex.
        assert.match(hget(got, 'last-modified') ?? '', HTTP_DATE, 'no Last-Modified');
        assert.equal(hget(head, 'last-modified'), hget(got, 'last-modified'));
        assert.equal(hget(got, 'etag'), `"${sha256hex(data)}"`);
    });

    it('ranges: a-b, -n, a- answer 206 with Content-Range and those bytes; unsatisfiable 416; If-None-Match 304; If-Range', async () => {
        const data = patterned(1000, 3);
        const { id } = await withArtifact('art.range', data, 'text/plain');
        const p = `/v1/jobs/${id}/result`;
        for (const [range, from, to] of [['bytes=10-19', 10, 19], ['bytes=-5', 995, 999], ['bytes=100-', 100, 999], ['bytes=990-5000', 990, 999]]) {
            const res = expectStatus(await bin(d, 'ka', 'GET', p, { headers: { range } }), 206);
            assert.equal(hget(res, 'content-range'), `bytes ${from}-${to}/1000`, range);
            assert.equal(hget(res, 'content-length'), String(to - from + 1), range);
            assert.ok(res.buf.equals(data.subarray(from, to + 1)), `${range}: wrong bytes`);
        }
        const bad = await bin(d, 'ka', 'GET', p, { headers: { range: 'bytes=999999999-' } });
        assertProblem(bad, 416, 'range-not-satisfiable');
        assert.equal(hget(bad, 'content-range'), 'bytes */1000');

        const several = expectStatus(await bin(d, 'ka', 'GET', p, { headers: { range: 'bytes=0-1,5-6' } }), 200);
        assert.ok(several.buf.equals(data));

        const etag = hget(expectStatus(await bin(d, 'ka', 'HEAD', p), 200), 'etag');
        assert.match(etag ?? '', /^"[^"]+"$/, 'no strong ETag');
        const nm = expectStatus(await bin(d, 'ka', 'GET', p, { headers: { 'if-none-match': etag } }), 304);
        assert.equal(nm.buf.length, 0);
        assert.equal(hget(nm, 'etag'), etag);
        expectStatus(await bin(d, 'ka', 'GET', p, { headers: { 'if-none-match': '"nope"' } }), 200);

        const wrong = expectStatus(await bin(d, 'ka', 'GET', p, { headers: { range: 'bytes=10-19', 'if-range': '"0000"' } }), 200);
        assert.ok(wrong.buf.equals(data), 'If-Range with another tag: not the whole artifact');
        const right = expectStatus(await bin(d, 'ka', 'GET', p, { headers: { range: 'bytes=10-19', 'if-range': etag } }), 206);
        assert.ok(right.buf.equals(data.subarray(10, 20)));
    });

    it('wrong Upload-Offset 409 with the offset; Content-Digest and Repr-Digest mismatches 400; a part over the cap 413; complete without a finished upload 409', async () => {
        const { id, leaseId } = await started('art.errors');
        const a = patterned(64 * KiB, 11);
        const b = patterned(64 * KiB, 12);
        expectStatus(await putPart(d, 'wa', id, leaseId, a, { last: false }), 204);

        const off = await putPart(d, 'wa', id, leaseId, b, { offset: 1000, last: false });
        assertProblem(off, 409, 'upload-offset-mismatch');
        assert.equal(hget(off, 'upload-offset'), String(a.length));

        const cd = await putPart(d, 'wa', id, leaseId, b, { offset: a.length, last: false, headers: { 'content-digest': digestOf(a) } });
        assertProblem(cd, 400, 'digest-mismatch');
        // Nothing of it was written: the offset is still after the first part.
        const h1 = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        assert.ok([200, 204].includes(h1.status), show(h1));
        assert.equal(hget(h1, 'upload-offset'), String(a.length));
        assert.equal(hget(h1, 'upload-complete'), '?0');

        // Not finished: complete with artifact refuses; with result and artifact both: 422.
        assertProblem(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 409, 'artifact-incomplete');
        const both = await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true, result: { x: 1 } });
        assert.equal(both.status, 422, show(both));

        const rd = await putPart(d, 'wa', id, leaseId, b, { offset: a.length, last: true, headers: { 'repr-digest': digestOf(b) } });
        assertProblem(rd, 400, 'digest-mismatch');
        // The upload is discarded: a part at the old offset no longer fits, and nothing is complete.
        assertProblem(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 409, 'artifact-incomplete');
        const old = await putPart(d, 'wa', id, leaseId, b, { offset: a.length, last: true });
        assertProblem(old, 409, 'upload-offset-mismatch');
        assert.equal(hget(old, 'upload-offset'), '0', show(old));

        // A part over limits.maxUploadPartBytes: 413 naming the cap. h2o may refuse before reading it all, so
        // it goes on a raw socket.
        const big = Buffer.alloc(PART_CAP + 1, 0x61);
        const wire = Buffer.concat([
            Buffer.from(
                `PUT /v1/jobs/${id}/result HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wa\r\nLease-Id: ${leaseId}\r\n` +
                    `Content-Type: application/octet-stream\r\nContent-Length: ${big.length}\r\nConnection: close\r\n\r\n`,
            ),
            big,
        ]);
        const tooBig = await rawRequest(d, wire, { timeoutMs: 10_000 });
        const v = openapi.check({ method: 'PUT', target: `/v1/jobs/${id}/result`, status: tooBig.status, headers: tooBig.headers, text: tooBig.body });
        assert.equal(v, null, v);
        assertProblem(tooBig, 413, 'payload-too-large', { instance: `/v1/jobs/${id}/result` });
        assert.match(tooBig.json.detail, new RegExp(`\\b${PART_CAP}\\b|\\b1 MiB\\b`), tooBig.body);

        // A part of exactly the cap is fine (and the body limit of JSON requests, 4096, does not apply).
        const done = await upload(d, 'wa', id, leaseId, patterned(PART_CAP, 13));
        assert.equal(done.json.size, PART_CAP);
    });

    it('HEAD with Lease-Id answers Upload-Offset: 0 before any part and after a discarded upload', async () => {
        const { id, leaseId } = await started('art.errors');
        const head = () => bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        let h = await head();
        assert.ok([200, 204].includes(h.status), `before any part: ${show(h)}`);
        assert.equal(hget(h, 'upload-offset'), '0', show(h));
        const a = patterned(1000, 14);
        expectStatus(await putPart(d, 'wa', id, leaseId, a, { last: false }), 204);
        assertProblem(await putPart(d, 'wa', id, leaseId, a, { offset: 1000, headers: { 'repr-digest': digestOf(a) } }), 400, 'digest-mismatch');
        h = await head();
        assert.ok([200, 204].includes(h.status), `after a discarded upload: ${show(h)}`);
        assert.equal(hget(h, 'upload-offset'), '0', show(h));
        assert.equal(hget(h, 'upload-complete'), '?0', show(h));
    });

    it('limits.maxResultBytes caps the total: 413', async () => {
        const { id, leaseId } = await started('art.cap');
        let off = 0;
        let res;
        for (let i = 0; i < RESULT_CAP / PART_CAP + 1; i++) {
            res = await putPart(d, 'wa', id, leaseId, patterned(PART_CAP, 20 + i), { offset: off === 0 ? null : off, last: false });
            if (res.status !== 204) break;
            off += PART_CAP;
        }
        // Every part up to the cap was taken, the one past it refused with the cap in its detail.
        assert.equal(off, RESULT_CAP, `accepted ${off} bytes with a cap of ${RESULT_CAP}: ${show(res)}`);
        assertProblem(res, 413, 'payload-too-large');
        assert.match(res.json.detail, new RegExp(`\\b${RESULT_CAP}\\b|\\b4 MiB\\b`), res.text);
        const h = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        assert.equal(hget(h, 'upload-offset'), String(RESULT_CAP), show(h));
    });

    it('a stale or made-up lease: 409 stale-lease and no file for it; complete without an upload: 409 artifact-incomplete', async () => {
        const { id, leaseId: old } = await started('art.stale', { leaseSeconds: 1 });
        // Let it run out; the sweeper requeues the job, and it is leased again.
        await sleep(1300);
        const again = await waitUntil(
            () => api(d, 'wa').post('/v1/leases', { types: ['art.stale'], max: 1, wait: 1, leaseSeconds: 30 }),
            (r) => r.status === 200,
            { what: 'the job to be leased again' },
        );
        assert.equal(again.json.leases[0].job.id, id);
        const fresh = again.json.leases[0].leaseId;
        const bytes = patterned(4096, 5);
        assertProblem(await putPart(d, 'wa', id, old, bytes), 409, 'stale-lease');
        assertProblem(await putPart(d, 'wa', id, old, bytes, { last: false }), 409, 'stale-lease');
        const fake = 'lse_AAAAAAAAAAAAAAAAAAAAAAAAAAAA';
        assertProblem(await putPart(d, 'wa', id, fake, bytes), 409, 'stale-lease');
        const files = artifactFiles(d, id);
        assert.deepEqual(files.filter((f) => f.startsWith(old) || f.startsWith(fake)), [], `artifacts/${id}: ${files}`);

        assertProblem(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId: fresh, artifact: true }), 409, 'artifact-incomplete');
        assert.equal((await getJob(api(d, 'ka'), id)).status, 'running');
        // The live lease still works.
        await upload(d, 'wa', id, fresh, bytes);
        assert.equal(expectStatus(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId: fresh, artifact: true }), 200).json.artifact.size, 4096);
    });

    it('GET /v1/jobs/{id}?onComplete=redirect answers 303 to a signed URL that downloads without a key, and is refused once expired', async () => {
        const data = patterned(5000, 9);
        const { id } = await withArtifact('art.signed', data, 'image/png');
        for (const q of ['onComplete=redirect', 'OnComplete=Redirect']) {
            const res = expectStatus(await api(d, 'ka').get(`/v1/jobs/${id}?${q}`), 303);
            const loc = hget(res, 'location');
            assert.match(loc ?? '', new RegExp(`/v1/jobs/${id}/result\\?(.*&)?exp=\\d+`), show(res));
            assert.match(loc, /[?&]sig=[A-Za-z0-9_-]+/);
        }
        const issuedAt = Date.now();
        const loc = hget(await api(d, 'ka').get(`/v1/jobs/${id}?onComplete=redirect`), 'location');
        const u = new URL(loc, d.url);
        const target = u.pathname + u.search;
        const exp = Number(u.searchParams.get('exp'));
        assert.ok(exp * 1000 <= Date.now() + (URL_SECONDS + 2) * 1000, `exp ${exp} is later than artifacts.urlSeconds (${URL_SECONDS}) from now`);
        const got = expectStatus(await bin(d, null, 'GET', target), 200);
        assert.ok(got.buf.equals(data), 'signed download: wrong bytes');
        assert.equal(hget(got, 'content-type'), 'image/png');
        const ranged = expectStatus(await bin(d, null, 'GET', target, { headers: { range: 'bytes=0-9' } }), 206);
        assert.ok(ranged.buf.equals(data.subarray(0, 10)));
        // A signature of another job, or a changed exp: refused.
        const forged = target.replace(`exp=${exp}`, `exp=${exp + 1000}`);
        assertProblem(await bin(d, null, 'GET', forged), 401, 'unauthorized');

        await sleep(exp * 1000 - Date.now() + 1200);
        assertProblem(await bin(d, null, 'GET', target), 401, 'unauthorized');
        // The URL lived at least the configured lifetime (exp rounded up, as POST :sign does).
        assert.ok(exp * 1000 >= issuedAt + URL_SECONDS * 1000, `exp ${exp} is ${exp * 1000 - issuedAt} ms after the redirect, less than ${URL_SECONDS} s`);
    });

    it("tenant b gets 404 on tenant a's artifact, GET and HEAD, and cannot upload to it", async () => {
        const data = patterned(3000, 4);
        const { id } = await withArtifact('art.tenant', data);
        assertProblem(await bin(d, 'kb', 'GET', `/v1/jobs/${id}/result`), 404, 'not-found');
        assertProblem(await bin(d, 'kb', 'GET', `/v1/jobs/${id}/result`, { headers: { range: 'bytes=0-9' } }), 404, 'not-found');
        const head = await bin(d, 'kb', 'HEAD', `/v1/jobs/${id}/result`);
        assert.equal(head.status, 404);
        assert.equal(head.buf.length, 0);
        const other = await leaseOne(api(d, 'wb'), 'art.tenant', { wait: 0 }).catch(() => null);
        assert.equal(other, null, 'tenant b leased something of tenant a');
        expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 200);
    });

    it('an upload cut off half-way leaves no artifact, and after the lease expires the collector removes every file', async () => {
        const { id, leaseId } = await started('art.cut', { leaseSeconds: 2 });
        const first = patterned(256 * KiB, 31);
        expectStatus(await putPart(d, 'wa', id, leaseId, first, { last: false }), 204);
        if (ON_DISK) assert.ok(artifactFiles(d, id).length > 0, 'the first part left no file: is it stored where the spec says?');

        const n = 512 * KiB;
        await new Promise((resolve) => {
            const u = new URL(d.url);
            const sock = net.connect({ host: u.hostname, port: Number(u.port) }, () => {
                sock.write(
                    `PUT /v1/jobs/${id}/result HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wa\r\nLease-Id: ${leaseId}\r\n` +
                        `Upload-Offset: ${first.length}\r\nUpload-Complete: ?1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${n}\r\n\r\n`,
                );
                sock.write(patterned(n / 2, 32), () => {
                    setTimeout(() => {
                        sock.destroy();
                        resolve();
                    }, 200);
                });
            });
            sock.on('error', resolve);
        });
        await sleep(200);
        const h = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        assert.equal(hget(h, 'upload-offset'), String(first.length), `the cut-off part moved the offset: ${show(h)}`);
        assert.equal(hget(h, 'upload-complete'), '?0');
        assert.equal((await getJob(api(d, 'ka'), id)).artifact, undefined);
        assertProblem(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 404, 'result-not-ready');

        // The lease runs out (2 s) and the collector (every second) removes the files.
        if (ON_DISK) await waitUntil(async () => artifactFiles(d, id), (f) => f.length === 0, { timeoutMs: 15_000, what: `artifacts/${id} to be emptied` });
        else await sleep(2500); // the lease runs out
        assertProblem(await putPart(d, 'wa', id, leaseId, first, { offset: first.length }), 409, 'stale-lease');
    });

    it('resume: HEAD with Lease-Id gives Upload-Offset; continuing from it finishes; a PUT without Upload-Offset starts afresh', async () => {
        const { id, leaseId } = await started('art.resume');
        const data = patterned(3 * PART_CAP - 100, 41);
        const half = Math.floor(PART_CAP / 2);
        expectStatus(await putPart(d, 'wa', id, leaseId, patterned(1000, 40), { last: false }), 204);
        // Starting afresh discards those 1000 bytes.
        expectStatus(await putPart(d, 'wa', id, leaseId, data.subarray(0, half), { last: false }), 204);
        expectStatus(await putPart(d, 'wa', id, leaseId, data.subarray(half, PART_CAP), { offset: half, last: false }), 204);

        const h = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        assert.ok([200, 204].includes(h.status), show(h));
        assert.equal(hget(h, 'upload-offset'), String(PART_CAP));
        assert.equal(hget(h, 'upload-complete'), '?0');
        // The next part names its lease in the query instead of the header.
        const from = Number(hget(h, 'upload-offset'));
        const q = await bin(d, 'wa', 'PUT', `/v1/jobs/${id}/result?leaseId=${leaseId}`, {
            body: data.subarray(from, from + PART_CAP),
            headers: { 'content-type': 'application/octet-stream', 'upload-offset': from, 'upload-complete': '?0' },
        });
        expectStatus(q, 204);
        assert.equal(hget(q, 'upload-offset'), String(from + PART_CAP), `?leaseId= in the query: ${show(q)}`);

        await upload(d, 'wa', id, leaseId, data, { from: from + PART_CAP });
        const done = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
        assert.equal(hget(done, 'upload-offset'), String(data.length));
        assert.equal(hget(done, 'upload-complete'), '?1');
        expectStatus(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 200);
        const got = expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 200);
        assert.equal(sha256hex(got.buf), sha256hex(data));
    });

    it('retention: once the job expires its artifact directory is removed and the result answers 410', async () => {
        const data = patterned(100 * KiB, 51);
        const { id, job } = await withArtifact('art.short', data);
        expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 200);
        if (ON_DISK) assert.ok(artifactFiles(d, id).length > 0);
        await sleep(Math.max(0, Date.parse(job.expiresAt) - Date.now()) + 300);
        const gone = await waitUntil(() => bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), (r) => r.status !== 200, { what: '410' });
        assertProblem(gone, 410, 'gone');
        if (ON_DISK) await waitUntil(
            async () => fs.existsSync(path.join(d.dataDir, 'artifacts', id)),
            (x) => x === false,
            { timeoutMs: 10_000, what: `artifacts/${id} to be removed` },
        );
    });
});


// The suite starts and stops its daemon inside its one test: with a suite-level after() hook, Node 20's runner
// now and then ran the hook (stopping the daemon) while the suite's only test was still running.
// A data dir on a 6 MiB tmpfs (mounted by the test, which runs as root: it fails rather than skips where it cannot):
// the part that does not fit is a 503 storage-full problem and is not kept, the upload stays where it was, and
// reads go on. Always SQLite: PostgreSQL's disk is its server's business.
describe('result artifacts: a full disk during an upload', () => {
    it('answers 503 storage-full, keeps the upload at its last good part, and keeps serving reads', async () => {
        const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-artfull-'));
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m,mode=0700', 'tmpfs', mnt], { stdio: 'pipe' });
        let d;
        try {
            d = await startDaemon({
                config: config({ limits: `{ maxBodyBytes: 4096, maxUploadPartBytes: ${PART_CAP} }`, artifacts: artifactsConf({ gc: 60 }) }),
                dataDir: path.join(mnt, 'data'),
                store: null,
            });
            const c = api(d, 'ka');
            const id = (await submit(c, { type: 'art.full', payload: {} })).json.id;
            const { leaseId } = await leaseOne(api(d, 'wa'), 'art.full', { expectId: id, leaseSeconds: 60 });
            const part = patterned(PART_CAP, 71);
            let offset = 0;
            let full = null;
            for (let i = 0; i < 12 && full === null; i++) {
                const res = await putPart(d, 'wa', id, leaseId, part, { offset: offset === 0 ? null : offset, last: false });
                if (res.status === 204) offset += part.length;
                else full = res;
            }
            assert.ok(full !== null, `6 MiB took ${offset} bytes without filling up`);
            assertProblem(full, 503, 'storage-full');
            assert.ok(offset > 0, 'not one part fitted');
            // The refused part was not kept: the upload resumes from the last part that was.
            const head = await bin(d, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
            assert.equal(head.status, 204, show(head));
            assert.equal(head.headers.get('upload-offset'), String(offset));
            // Reads go on: the job, a list.
            assert.equal((await getJob(c, id)).status, 'running');
            expectStatus(await c.get('/v1/jobs?limit=5'), 200);
            // The lease is still the worker's: the job can end (fail) through the writer, whose store has room left.
            const done = await api(d, 'wa').post(`/v1/jobs/${id}:fail`, { leaseId, retryable: false, error: { title: 'disk full' } });
            assert.ok(done.status === 200 || done.status === 503, show(done));
        } finally {
            await d?.kill9();
            try {
                execFileSync('umount', [mnt], { stdio: 'pipe' });
            } catch {
                execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
            }
            fs.rmSync(mnt, { recursive: true, force: true });
        }
    });
});

describe('result artifacts: kill -9 during an upload', () => {
    it('after a restart the job shows no artifact, its result is not the partial bytes, and once the lease expired no file is left', async () => {
        const d = await startDaemon({
            config: config({ limits: `{ maxBodyBytes: 4096, maxWaitSeconds: 5, maxUploadPartBytes: ${PART_CAP} }`, artifacts: artifactsConf({ gc: 1 }) }),
        });
        try {
            await killDuringUpload(d);
        } finally {
            await stopClean(d);
        }
    });
});

/** Two parts of an upload, kill -9, restart: nothing of it shows, and the collector removes it. */
async function killDuringUpload(d) {
    const id = (await submit(api(d, 'ka'), { type: 'art.kill', payload: {} })).json.id;
    const { leaseId } = await leaseOne(api(d, 'wa'), 'art.kill', { expectId: id, leaseSeconds: 3 });
    const partial = patterned(2 * PART_CAP, 61);
    expectStatus(await putPart(d, 'wa', id, leaseId, partial.subarray(0, PART_CAP), { last: false }), 204);
    expectStatus(await putPart(d, 'wa', id, leaseId, partial.subarray(PART_CAP), { offset: PART_CAP, last: false }), 204);
    await d.kill9();
    await d.restart();

    const job = await getJob(api(d, 'ka'), id);
    assert.equal(job.artifact, undefined, JSON.stringify(job));
    const res = await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`);
    assert.notEqual(res.status, 200, show(res));
    assert.ok(!res.buf.equals(partial.subarray(0, res.buf.length)) || res.buf.length === 0, 'the partial bytes were served');
    // The lease may still be live (then the upload is unfinished) or already expired.
    assertProblem(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 409, ['artifact-incomplete', 'stale-lease']);
    if (ON_DISK) await waitUntil(async () => artifactFiles(d, id), (f) => f.length === 0, { timeoutMs: 20_000, what: `artifacts/${id} to be emptied after the lease expired` });
}

describe(`result artifacts: ${BIG_MB} MiB in 4 MiB parts`, () => {
    it('uploads and downloads with the same sha-256 while the daemon RSS grows by less than 32 MiB', { timeout: 15 * 60_000 }, async (t) => {
        const d = await startDaemon({ config: config({ limits: '{ maxBodyBytes: 4096, maxWaitSeconds: 5 }', artifacts: artifactsConf({ gc: 60 }) }) });
        try {
            await bigTransfer(d, t);
        } finally {
            await stopClean(d);
        }
    });
});

/** BIG_MB MiB up in 4 MiB parts and down, hashed on the fly, with the daemon's RSS sampled throughout. */
async function bigTransfer(d, t) {
    const part = 4 * MiB;
    const total = BIG_MB * MiB;
    const base = patterned(part, 99);
    const buf = Buffer.allocUnsafe(part);
    const partBytes = (i) => {
        base.copy(buf);
        buf.writeUInt32LE(i, 0); // every part differs
        return buf.subarray(0, Math.min(part, total - i * part));
    };
    const pid = d.proc.pid;
    const id = (await submit(api(d, 'ka'), { type: 'art.big', payload: {} })).json.id;
    const { leaseId } = await leaseOne(api(d, 'wa'), 'art.big', { expectId: id, leaseSeconds: 600 });
    const rss0 = rssKiB(pid);
    let peak = rss0;
    const sampler = setInterval(() => {
        peak = Math.max(peak, rssKiB(pid));
    }, 25);
    try {
        const t0 = Date.now();
        const hash = createHash('sha256');
        const n = Math.ceil(total / part);
        for (let i = 0; i < n; i++) {
            const b = partBytes(i);
            hash.update(b);
            const last = i === n - 1;
            const res = await putPart(d, 'wa', id, leaseId, b, { offset: i === 0 ? null : i * part, last });
            expectStatus(res, last ? 200 : 204);
            peak = Math.max(peak, rssKiB(pid));
        }
        const want = hash.digest('hex');
        const up = Date.now() - t0;
        expectStatus(await api(d, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 200);

        const t1 = Date.now();
        const res = await fetch(`${d.url}/v1/jobs/${id}/result`, { headers: { authorization: 'Bearer ka' } });
        const v = openapi.check({ method: 'GET', target: `/v1/jobs/${id}/result`, status: res.status, headers: res.headers, bodyRead: false });
        assert.equal(v, null, v);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-length'), String(total));
        assert.ok(res.headers.get('etag'), 'no ETag');
        const got = createHash('sha256');
        let size = 0;
        for await (const chunk of res.body) {
            got.update(chunk);
            size += chunk.length;
        }
        const down = Date.now() - t1;
        assert.equal(size, total);
        assert.equal(got.digest('hex'), want, 'downloaded bytes differ');
        t.diagnostic(`${BIG_MB} MiB: upload ${up} ms, download ${down} ms; RSS ${rss0} KiB at start, peak ${peak} KiB (+${peak - rss0} KiB)`);
    } finally {
        clearInterval(sampler);
    }
    // ASan's quarantine keeps freed parts mapped: the figure means nothing there.
    if (!process.env.ACCEPTD_SANITIZED) assert.ok(peak - rss0 < 32 * 1024, `daemon RSS grew by ${peak - rss0} KiB (from ${rss0} KiB) during the transfer`);
}
