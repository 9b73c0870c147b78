// Result artifacts through the command-line clients: `acceptd worker` uploads the file a command leaves at
// $ACCEPTD_RESULT_FILE, `acceptd jobs result ID -O FILE` and `acceptd submit T --wait -O FILE` download it and
// check it against the job's sha-256 digest. The bytes are deterministic (a SHA-256 counter stream written by
// this file), so every digest is computed here independently. A small proxy in this file stands between a
// client and the daemon where a test needs the network to misbehave: one that flips a byte of a download, one
// that loses the answer to an upload part. Artifact endpoints are read with plain fetch (not lib/daemon.mjs's
// api(), which checks answers against docs/openapi.json).

import { describe, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { it, startDaemon } from './lib/daemon.mjs';
import { BIN, spawnWorker } from './lib/worker.mjs';
import { waitUntil } from './lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1;
const TYPE = 'file.job';
const MANUAL = 'file.manual'; // uploaded by the test itself, so that the CLI's tests do not depend on the worker's
const CLIENT_KEY = 'ck-art';
const WORKER_KEY = 'wk-art';
const SIZE = 20 * 1024 * 1024 + 12345; // parts of 4 MiB, the last one short
const CONFIG = `keys:
  - { key: "${CLIENT_KEY}", tenant: a, role: client }
  - { key: "${WORKER_KEY}", tenant: a, role: worker }
types:
  ${TYPE}: {}
  ${MANUAL}: {}
routes:
  - { method: POST, path: /v1/files, type: ${MANUAL}, onComplete: redirect }
limits: { maxWaitSeconds: 5 }
`;

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-artifacts-'));
after(() => {
    if (!process.env.ACCEPTD_KEEP_TMP) fs.rmSync(tmpRoot, { recursive: true, force: true });
});

/** n deterministic bytes: SHA-256 of a counter, block after block. */
function streamBytes(n, seed) {
    const out = Buffer.alloc(n);
    for (let i = 0, off = 0; off < n; i++) {
        const h = crypto.createHash('sha256').update(`${seed}:${i}`).digest();
        off += h.copy(out, off);
    }
    return out;
}
const sha256 = (b) => crypto.createHash('sha256').update(b).digest();
const digestOf = (b) => `sha-256=:${sha256(b).toString('base64')}:`;

const SOURCE = path.join(tmpRoot, 'source.bin');
const BYTES = streamBytes(SIZE, 'acceptd-artifact');
fs.writeFileSync(SOURCE, BYTES);

// The job's command: the deterministic bytes to the result file, its type to the sidecar, and where the
// result file was (to check the worker removes it) to the test's directory.
const SCRIPT = path.join(tmpRoot, 'produce.sh');
fs.writeFileSync(
    SCRIPT,
    `#!/bin/sh
echo "::progress 50 writing"
printf '%s' "$ACCEPTD_RESULT_FILE" > "$TEST_DIR/result-path.$ACCEPTD_JOB_ID"
cat "$SOURCE" > "$ACCEPTD_RESULT_FILE" || exit 3
echo 'application/x-test; v=1' > "$ACCEPTD_RESULT_FILE.type"
echo '{"ignored": true}'
`,
    { mode: 0o755 },
);

const live = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
});

/** Run `acceptd ARGS` to its end; {code, signal, stdout, stderr}. ACCEPTD_* of the test's environment removed. */
function run(args, { limitMs = 60_000 * SLOW } = {}) {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('ACCEPTD_') && k !== 'ACCEPTD_SANITIZED') delete env[k];
    const proc = spawn(BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(proc);
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (c) => (stdout += c));
    proc.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const timer = setTimeout(() => proc.kill('SIGKILL'), limitMs);
    return new Promise((resolve) => {
        proc.on('close', (code, signal) => {
            clearTimeout(timer);
            live.delete(proc);
            resolve({ code, signal, stdout, stderr, what: `acceptd ${args.join(' ')}` });
        });
    });
}
const shown = (r) => `${r.what}: exit ${r.code} (signal ${r.signal})\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`;

async function call(url, method, p, key, body, headers = {}) {
    const h = { authorization: `Bearer ${key}`, ...headers };
    if (body !== undefined) h['content-type'] = 'application/json';
    const res = await fetch(url + p, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual' });
    const buf = Buffer.from(await res.arrayBuffer());
    let json = null;
    try {
        json = JSON.parse(buf.toString('utf8'));
    } catch {
        /* bytes */
    }
    return { status: res.status, headers: res.headers, buf, json };
}

function startWorker(url, dir) {
    const env = { ...process.env, ACCEPTD_KEY: WORKER_KEY, TEST_DIR: dir, SOURCE };
    delete env.ACCEPTD_URL;
    const args = ['worker', '--url', url, '--type', TYPE, '--lease-seconds', '10', '--lease-wait', '1', '--', SCRIPT];
    return spawnWorker(args, env);
}

async function submitJob(url, type = TYPE) {
    const r = await call(url, 'POST', '/v1/jobs', CLIENT_KEY, { type, payload: {} });
    assert.equal(r.status, 202, r.buf.toString());
    return r.json.id;
}

async function waitEnded(url, id) {
    return waitUntil(
        async () => (await call(url, 'GET', `/v1/jobs/${id}`, CLIENT_KEY)).json,
        (j) => j && ['succeeded', 'failed', 'cancelled', 'partialSuccess'].includes(j.status),
        { timeoutMs: 60_000 * SLOW, what: `job ${id} to end` },
    );
}

/** A succeeded job of type MANUAL whose artifact is bytes, uploaded here as a worker would (in parts). */
async function artifactJob(url, bytes, { route = false } = {}) {
    let id;
    if (route) {
        const r = await call(url, 'POST', '/v1/files', CLIENT_KEY, {});
        assert.equal(r.status, 202, r.buf.toString());
        id = r.json.id;
    } else {
        id = await submitJob(url, MANUAL);
    }
    const l = await call(url, 'POST', '/v1/leases', WORKER_KEY, { types: [MANUAL], max: 1, wait: 5, leaseSeconds: 60 });
    assert.equal(l.status, 200, l.buf.toString());
    const { leaseId, job } = l.json.leases[0];
    assert.equal(job.id, id);
    const PART = 4 * 1024 * 1024;
    for (let off = 0; off < bytes.length; off += PART) {
        const last = off + PART >= bytes.length;
        const headers = { authorization: `Bearer ${WORKER_KEY}`, 'lease-id': leaseId, 'content-type': 'application/octet-stream', 'upload-complete': last ? '?1' : '?0' };
        if (off > 0) headers['upload-offset'] = String(off);
        const r = await fetch(`${url}/v1/jobs/${id}/result`, { method: 'PUT', headers, body: bytes.subarray(off, off + PART) });
        assert.equal(r.status, last ? 200 : 204, `PUT at ${off}: ${await r.text()}`);
    }
    const c = await call(url, 'POST', `/v1/jobs/${id}:complete`, WORKER_KEY, { leaseId, artifact: true });
    assert.equal(c.status, 200, c.buf.toString());
    return id;
}

/**
 * An HTTP proxy to target that buffers each request and answer; hook(req, upstream answer) may change the
 * answer's body ({body}) or drop the connection instead of answering ({drop: true}). Records what passed.
 */
async function startProxy(target, hook) {
    const seen = [];
    const server = http.createServer((req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            const body = Buffer.concat(chunks);
            const up = http.request(target + req.url, { method: req.method, headers: req.headers }, (ur) => {
                const rc = [];
                ur.on('data', (c) => rc.push(c));
                ur.on('end', () => {
                    let answer = Buffer.concat(rc);
                    const entry = { method: req.method, url: req.url, headers: req.headers, status: ur.statusCode, answerHeaders: ur.headers };
                    seen.push(entry);
                    const out = hook(entry, answer) ?? {};
                    if (out.drop) {
                        req.socket.destroy();
                        return;
                    }
                    if (out.body) answer = out.body;
                    const headers = { ...ur.headers };
                    delete headers['transfer-encoding'];
                    headers['content-length'] = String(answer.length);
                    res.writeHead(ur.statusCode, headers);
                    res.end(answer);
                });
            });
            up.on('error', () => req.socket.destroy());
            up.end(body);
        });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return {
        url: `http://127.0.0.1:${server.address().port}`,
        seen,
        close: () => new Promise((r) => server.close(r)),
    };
}

describe('cli artifacts', () => {
    let d;
    let worker;
    let dir;
    before(async () => {
        d = await startDaemon({ config: CONFIG });
        dir = fs.mkdtempSync(path.join(tmpRoot, 'w-'));
        worker = startWorker(d.url, dir);
    });
    after(async () => {
        if (worker) await worker.stopClean(); // under ASan also: no leak in the upload path
        if (d) await d.stop();
    });

    it('(a) worker: the file a command leaves at $ACCEPTD_RESULT_FILE becomes the job\'s artifact', async () => {
        const id = await submitJob(d.url);
        const job = await waitEnded(d.url, id);
        assert.equal(job.status, 'succeeded', `${JSON.stringify(job)}\n${worker.stderr}`);
        assert.equal(job.result ?? null, null, 'stdout is not the result when there is a result file');
        assert.deepEqual(job.artifact, { size: SIZE, contentType: 'application/x-test; v=1', digest: digestOf(BYTES), href: `/v1/jobs/${id}/result` });
        const got = await call(d.url, 'GET', `/v1/jobs/${id}/result`, CLIENT_KEY, undefined, { accept: '*/*' });
        assert.equal(got.status, 200);
        assert.equal(got.buf.length, SIZE);
        assert.ok(got.buf.equals(BYTES), 'the downloaded bytes are the command\'s');
        // The worker removes the result file (and its private directory) once the job is reported.
        const where = fs.readFileSync(path.join(dir, `result-path.${id}`), 'utf8');
        assert.match(where, /\/result$/);
        await waitUntil(async () => fs.existsSync(path.dirname(where)), (x) => !x, { timeoutMs: 10_000 * SLOW, what: `${where} removed` });
    });

    it('(b) jobs result ID -O FILE saves the artifact; without -O it describes it', async () => {
        const doneId = await artifactJob(d.url, BYTES);
        const out = path.join(tmpRoot, 'b.bin');
        const r = await run(['jobs', 'result', doneId, '-O', out, '--url', d.url, '--key', CLIENT_KEY]);
        assert.equal(r.code, 0, shown(r));
        assert.ok(fs.readFileSync(out).equals(BYTES), 'FILE holds the artifact');
        assert.equal(fs.existsSync(`${out}.part`), false);
        assert.equal(r.stdout, '', shown(r));
        const info = await run(['jobs', 'result', doneId, '--url', d.url, '--key', CLIENT_KEY]);
        assert.equal(info.code, 0, shown(info));
        assert.deepEqual(JSON.parse(info.stdout), { artifact: { size: SIZE, contentType: 'application/octet-stream', digest: digestOf(BYTES), href: `/v1/jobs/${doneId}/result` } });
    });

    it('(b2) jobs result -O on a job whose route answers finished jobs with a redirect', async () => {
        const small = streamBytes(300_000, 'routed');
        const id = await artifactJob(d.url, small, { route: true });
        const plain = await call(d.url, 'GET', `/v1/jobs/${id}`, CLIENT_KEY);
        assert.equal(plain.status, 303, 'the route redirects a read of the finished job');
        const out = path.join(tmpRoot, 'b-routed.bin');
        const r = await run(['jobs', 'result', id, '-O', out, '--url', d.url, '--key', CLIENT_KEY]);
        assert.equal(r.code, 0, shown(r));
        assert.ok(fs.readFileSync(out).equals(small), 'FILE holds the artifact');
    });

    it('(c) submit T --wait -O FILE: submitted, run by the worker, saved and checked', async () => {
        const out = path.join(tmpRoot, 'c.bin');
        const r = await run(['submit', TYPE, '--wait', '-O', out, '--url', d.url, '--key', CLIENT_KEY]);
        assert.equal(r.code, 0, `${shown(r)}\n${worker.stderr}`);
        assert.ok(fs.readFileSync(out).equals(BYTES), 'FILE holds the artifact');
        assert.equal(fs.existsSync(`${out}.part`), false);
        assert.match(r.stderr, /saved \d+ bytes to .*c\.bin \(sha-256 verified\)/, shown(r));
    });

    it('(d) a download whose bytes do not match the digest: exit 8, FILE not written', async () => {
        const small = streamBytes(100_000, 'small');
        const doneId = await artifactJob(d.url, small);
        // The job document passes unchanged; the result's bytes get one bit flipped in the middle.
        const proxy = await startProxy(d.url, (e, body) => {
            if (e.method === 'GET' && e.url === `/v1/jobs/${doneId}/result` && e.status === 200) {
                const b = Buffer.from(body);
                b[b.length >> 1] ^= 0x01;
                return { body: b };
            }
            return null;
        });
        try {
            const out = path.join(tmpRoot, 'd.bin');
            const r = await run(['jobs', 'result', doneId, '-O', out, '--url', proxy.url, '--key', CLIENT_KEY]);
            assert.equal(r.code, 8, shown(r));
            assert.match(r.stderr, /corrupt/, shown(r));
            assert.equal(fs.existsSync(out), false, 'FILE must not appear');
            assert.equal(fs.existsSync(`${out}.part`), false, 'FILE.part is removed');
            assert.ok(proxy.seen.some((e) => e.url === `/v1/jobs/${doneId}/result`), 'the download went through the proxy');
        } finally {
            await proxy.close();
        }
    });
});

describe('cli artifacts: an upload part whose answer is lost', () => {
    it('the worker resumes from the Upload-Offset of the 409 upload-offset-mismatch', async () => {
        const d = await startDaemon({ config: CONFIG });
        const dir = fs.mkdtempSync(path.join(tmpRoot, 'r-'));
        let dropped = false;
        // The second part reaches the daemon, which keeps it, but its answer never reaches the worker.
        const proxy = await startProxy(d.url, (e) => {
            if (!dropped && e.method === 'PUT' && e.headers['upload-offset'] !== undefined && e.status === 204) {
                dropped = true;
                return { drop: true };
            }
            return null;
        });
        const worker = startWorker(proxy.url, dir);
        try {
            const id = await submitJob(d.url);
            const job = await waitEnded(d.url, id);
            assert.equal(job.status, 'succeeded', `${JSON.stringify(job)}\n${worker.stderr}`);
            assert.equal(job.artifact?.digest, digestOf(BYTES));
            assert.ok(dropped, 'an answer was dropped');
            const puts = proxy.seen.filter((e) => e.method === 'PUT');
            const mismatch = puts.find((e) => e.status === 409);
            assert.ok(mismatch, `a part was sent again and refused: ${JSON.stringify(puts.map((e) => [e.headers['upload-offset'], e.status]))}`);
            const resumed = puts[puts.indexOf(mismatch) + 1];
            assert.equal(resumed?.headers['upload-offset'], mismatch.answerHeaders['upload-offset'], 'resumed where the server was');
            const got = await call(d.url, 'GET', `/v1/jobs/${id}/result`, CLIENT_KEY, undefined, { accept: '*/*' });
            assert.ok(got.buf.equals(BYTES), 'the artifact is whole');
            await worker.stopClean();
        } finally {
            await worker.stop('SIGKILL');
            await proxy.close();
            await d.stop();
        }
    });
});

describe('cli artifacts: a result file the daemon refuses', () => {
    it('fails the job with result-rejected and the daemon\'s answer', async () => {
        const d = await startDaemon({ config: CONFIG.replace('limits: { maxWaitSeconds: 5 }', 'limits: { maxWaitSeconds: 5, maxResultBytes: 10485760 }') });
        const dir = fs.mkdtempSync(path.join(tmpRoot, 'x-'));
        const worker = startWorker(d.url, dir);
        try {
            const id = await submitJob(d.url);
            const job = await waitEnded(d.url, id);
            assert.equal(job.status, 'failed', `${JSON.stringify(job)}\n${worker.stderr}`);
            assert.equal(job.error?.code, 'result-rejected', JSON.stringify(job.error));
            assert.match(job.error.detail, /HTTP 413 payload-too-large/, job.error.detail);
            assert.equal(job.artifact ?? null, null);
            const where = fs.readFileSync(path.join(dir, `result-path.${id}`), 'utf8');
            await waitUntil(async () => fs.existsSync(path.dirname(where)), (x) => !x, { timeoutMs: 10_000 * SLOW, what: `${where} removed` });
            await worker.stopClean();
        } finally {
            await worker.stop('SIGKILL');
            await d.stop();
        }
    });
});

// 4150000: a 4 MiB part reaches the daemon's handler, whose 413 names the cap; 1500000: h2o refuses a 4 MiB
// body before the handler (its limit is the cap plus 64 KiB) with a 413 that does not say the cap.
for (const [cap, said] of [[4150000, /sending parts of 4150000 bytes/], [1500000, /sending parts of 1048576 bytes/]]) {
    describe(`cli artifacts: a daemon whose parts are at most ${cap} bytes`, () => {
        it('the worker sends smaller parts after the 413 and the upload succeeds', async () => {
            const d = await startDaemon({ config: CONFIG.replace('limits: { maxWaitSeconds: 5 }', `limits: { maxWaitSeconds: 5, maxUploadPartBytes: ${cap} }`) });
            const dir = fs.mkdtempSync(path.join(tmpRoot, 'p-'));
            const worker = startWorker(d.url, dir);
            try {
                const id = await submitJob(d.url);
                const job = await waitEnded(d.url, id);
                assert.equal(job.status, 'succeeded', `${JSON.stringify(job)}\n${worker.stderr}`);
                assert.equal(job.artifact?.digest, digestOf(BYTES));
                assert.match(worker.stderr, said);
                const got = await call(d.url, 'GET', `/v1/jobs/${id}/result`, CLIENT_KEY, undefined, { accept: '*/*' });
                assert.ok(got.buf.equals(BYTES), 'the artifact is whole');
                await worker.stopClean();
            } finally {
                await worker.stop('SIGKILL');
                await d.stop();
            }
        });
    });
}
