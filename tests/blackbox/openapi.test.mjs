// GET /openapi.json: the daemon serves docs/openapi.json byte for byte (with a strong ETag), the document passes
// Redocly's linter with the `recommended` rules (redocly.yaml), and a client generated from it
// (openapi-typescript for the types, openapi-fetch for the calls) submits, polls, leases, completes a job and
// reads its result. Every other test checks its answers against the same document (lib/openapi.mjs).

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import createClient from 'openapi-fetch';
import { it, startDaemon, tenant, api } from './lib/daemon.mjs';
import { expectStatus, hget, STRONG_ETAG } from './lib/jobs.mjs';
import * as openapi from './lib/openapi.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN_DIR = path.join(REPO_ROOT, 'node_modules', '.bin');
const TOOL_LIMIT_MS = 120_000;

/** Run a tool from node_modules/.bin; resolves {code, out} (stdout and stderr together). */
function run(tool, args) {
    return new Promise((resolve) => {
        execFile(
            path.join(BIN_DIR, tool),
            args,
            {
                cwd: REPO_ROOT,
                timeout: TOOL_LIMIT_MS,
                maxBuffer: 16 << 20,
                env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
            },
            (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
        );
    });
}

/** fetch for openapi-fetch that holds each answer to the document too, as api() does. */
async function checkedFetch(input, init) {
    const res = await fetch(input, init);
    const req = input instanceof Request ? input : new Request(input, init);
    const text = await res.clone().text();
    const violation = openapi.check({ method: req.method, target: new URL(req.url).pathname + new URL(req.url).search, status: res.status, headers: res.headers, text });
    if (violation) throw new Error(violation);
    return res;
}

describe('OpenAPI document', () => {
    let d;
    let tmp;
    let served; // the served document's text
    before(async () => {
        d = await startDaemon();
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-openapi-'));
    });
    after(async () => {
        await d?.stop();
        if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    async function document() {
        if (served === undefined) {
            const res = expectStatus(await api(d).get('/openapi.json'), 200);
            served = res.text;
        }
        return served;
    }

    it('is served without a key, as application/json, byte for byte docs/openapi.json, with a strong ETag and 304', async () => {
        const res = expectStatus(await api(d).get('/openapi.json'), 200);
        assert.match(hget(res, 'content-type'), /^application\/json\b/);
        assert.equal(res.text, fs.readFileSync(openapi.DOC_FILE, 'utf8'), 'the served document differs from docs/openapi.json');
        const doc = JSON.parse(res.text);
        assert.equal(doc.openapi, '3.1.0');
        const etag = hget(res, 'etag');
        assert.match(etag, STRONG_ETAG);
        const again = await api(d).get('/openapi.json', { headers: { 'if-none-match': etag } });
        assert.equal(again.status, 304);
        assert.equal(hget(again, 'etag'), etag);
        // The harness's validator is live: an answer the document does not describe is refused.
        if (openapi.enabled) {
            assert.match(
                openapi.check({ method: 'GET', target: '/openapi.json', status: 418, headers: res.headers, text: res.text, record: false }) ?? '',
                /GET \/openapi.json -> 418 .*status 418 is not documented/,
            );
        }
    });

    it('passes redocly lint (recommended rules) with no errors', async () => {
        const file = path.join(tmp, 'openapi.json');
        fs.writeFileSync(file, await document());
        const { code, out } = await run('redocly', ['lint', '--config', path.join(REPO_ROOT, 'redocly.yaml'), '--format', 'stylish', file]);
        assert.equal(code, 0, `redocly lint failed:\n${out}`);
        assert.doesNotMatch(out, /\berror\b/i, out);
    });

    it('generates a client (openapi-typescript) that submits, polls, leases, completes a job and reads its result (openapi-fetch)', async () => {
        const file = path.join(tmp, 'served.json');
        fs.writeFileSync(file, await document());
        const dts = path.join(tmp, 'acceptd.d.ts');
        const gen = await run('openapi-typescript', [file, '-o', dts]);
        assert.equal(gen.code, 0, `openapi-typescript failed:\n${gen.out}`);
        const types = fs.readFileSync(dts, 'utf8');
        for (const p of ['"/v1/jobs"', '"/v1/jobs/{id}"', '"/v1/leases"', '"/v1/jobs/{id}:complete"', '"/v1/jobs/{id}/result"']) {
            assert.ok(types.includes(p), `the generated types have no ${p}`);
        }
        assert.match(types, /\bJob: \{/, 'the generated types have no Job schema');

        const t = tenant(d);
        const client = createClient({ baseUrl: d.url, headers: { authorization: `Bearer ${t.keys.c}` }, fetch: checkedFetch });
        const worker = createClient({ baseUrl: d.url, headers: { authorization: `Bearer ${t.keys.w}` }, fetch: checkedFetch });

        const submitted = await client.POST('/v1/jobs', { body: { type: 'report.export', payload: { month: '2026-11' } } });
        assert.equal(submitted.response.status, 202, JSON.stringify(submitted.error));
        const id = submitted.data.id;
        assert.equal(submitted.data.status, 'queued');
        assert.equal(submitted.response.headers.get('location'), `/v1/jobs/${id}`);

        const polled = await client.GET('/v1/jobs/{id}', { params: { path: { id } } });
        assert.equal(polled.response.status, 200);
        assert.equal(polled.data.id, id);
        const etag = polled.response.headers.get('etag');
        const unchanged = await client.GET('/v1/jobs/{id}', { params: { path: { id }, header: { 'If-None-Match': etag } } });
        assert.equal(unchanged.response.status, 304);

        const leased = await worker.POST('/v1/leases', { body: { types: ['report.export'], wait: 2, worker: 'generated' } });
        assert.equal(leased.response.status, 200, JSON.stringify(leased.error));
        assert.equal(leased.data.leases.length, 1);
        const { leaseId, job } = leased.data.leases[0];
        assert.equal(job.id, id);
        assert.equal(job.status, 'running');

        const progress = await worker.POST('/v1/jobs/{id}:heartbeat', { params: { path: { id } }, body: { leaseId, progress: 50 } });
        assert.equal(progress.response.status, 200, JSON.stringify(progress.error));
        assert.equal(progress.data.job.progress, 50);

        const done = await worker.POST('/v1/jobs/{id}:complete', { params: { path: { id } }, body: { leaseId, result: { rows: 42 } } });
        assert.equal(done.response.status, 200, JSON.stringify(done.error));
        assert.equal(done.data.status, 'succeeded');

        const final = await client.GET('/v1/jobs/{id}', { params: { path: { id } } });
        assert.equal(final.data.status, 'succeeded');
        assert.deepEqual(final.data.result, { rows: 42 });
        const result = await client.GET('/v1/jobs/{id}/result', { params: { path: { id } } });
        assert.equal(result.response.status, 200);
        assert.deepEqual(result.data, { rows: 42 });

        const stale = await worker.POST('/v1/jobs/{id}:complete', { params: { path: { id } }, body: { leaseId: 'lse_nope', result: null } });
        assert.equal(stale.response.status, 409);
        assert.equal(stale.error.code, 'stale-lease');
    });
});
