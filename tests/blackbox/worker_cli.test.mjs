// `acceptd worker`: the command-line worker that leases jobs and runs a command per job. Each test starts
// its own daemon and its own worker process(es) running small shell scripts written to a temp dir, and
// watches the jobs only through the HTTP API (and the files the scripts leave behind).

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it, startDaemon, api } from './lib/daemon.mjs';
import { BIN, spawnWorker } from './lib/worker.mjs';
import { expectStatus, getJob, show, sleep, submit, waitUntil } from './lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1; // the ASan build is slower
const TYPE = 'sh.job';
const WORKER_KEY = 'wk-S3CRET-7f3a'; // distinctive, so a leak into the log is easy to spot
const CONFIG = `keys:
  - { key: "ka", tenant: a, role: client }
  - { key: "${WORKER_KEY}", tenant: a, role: worker }
types:
  ${TYPE}: {}
retryBackoff: 200ms
limits: { maxWaitSeconds: 5 }
`;

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-worker-'));
after(() => {
    if (!process.env.ACCEPTD_KEEP_TMP) fs.rmSync(tmpRoot, { recursive: true, force: true });
});

/** A fresh directory with the given scripts (name -> body, made executable). */
function scriptDir(scripts) {
    const dir = fs.mkdtempSync(path.join(tmpRoot, 't-'));
    for (const [name, body] of Object.entries(scripts)) {
        fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}`, { mode: 0o755 });
    }
    return dir;
}

/**
 * Start `acceptd worker` against daemon d. Returns {proc, stderr (getter), exited (promise of {code, signal}),
 * stop(signal)}. The key goes in ACCEPTD_KEY unless keyFlag is set; TEST_DIR is in the environment.
 */
function startWorker(d, { dir, command, key = WORKER_KEY, keyFlag = false, concurrency = 1, leaseSeconds = 3, grace = 5, extra = [] }) {
    const args = ['worker', '--url', d.url, '--type', TYPE, '--concurrency', String(concurrency), '--lease-seconds',
        String(leaseSeconds), '--grace', String(grace), '--lease-wait', '1', ...extra];
    if (keyFlag) args.push('--key', key);
    args.push('--', ...command);
    const env = { ...process.env, TEST_DIR: dir };
    delete env.ACCEPTD_URL;
    if (keyFlag) delete env.ACCEPTD_KEY;
    else env.ACCEPTD_KEY = key;
    return spawnWorker(args, env);
}

/** Wait for a process exit with a deadline; fails with the worker's log. */
async function exitWithin(w, ms, what) {
    let timer;
    const r = await Promise.race([w.exited, new Promise((resolve) => (timer = setTimeout(() => resolve(null), ms)))]);
    clearTimeout(timer);
    assert.ok(r !== null, `${what}: the worker did not exit within ${ms} ms\n${w.stderr}`);
    return r;
}

/** Start a daemon and return it with its client API. */
async function setup() {
    const d = await startDaemon({ config: CONFIG });
    return { d, c: api(d, 'ka') };
}

const waitJob = (c, id, pred, what, timeoutMs = 20_000 * SLOW) =>
    waitUntil(() => getJob(c, id), pred, { timeoutMs, intervalMs: 50, what });

const exists = (p) => fs.existsSync(p);

describe('acceptd worker', () => {
    it('runs a job: queued -> running with the progress the command printed -> succeeded with its JSON', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
echo "::progress 37 warming up"
while [ ! -f "$TEST_DIR/go" ]; do sleep 0.05; done
printf '{"ok":\\n'
echo "::progress 80" >&2
echo "::progress 90 almost"
printf ' true, "n": 7}\\n'
`,
        });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {} })).json.id;
        assert.equal((await getJob(c, id)).status, 'queued');
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')] });
        try {
            const running = await waitJob(c, id, (j) => j.status === 'running' && j.progress === 37, 'running at 37%');
            assert.equal(running.message, 'warming up');
            assert.equal(running.attempt, 1);
            fs.writeFileSync(path.join(dir, 'go'), '');
            const done = await waitJob(c, id, (j) => j.status === 'succeeded' || j.status === 'failed', 'the end');
            assert.equal(done.status, 'succeeded', JSON.stringify(done));
            assert.deepEqual(done.result, { ok: true, n: 7 });
            const res = expectStatus(await c.get(`/v1/jobs/${id}/result`), 200);
            assert.deepEqual(res.json, { ok: true, n: 7 }, show(res));
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('gives the command the payload on stdin and the job in its environment; never the key', async () => {
        const dir = scriptDir({
            'job.sh': `payload=$(cat)
printf '{"payload": %s, "id": "%s", "type": "%s", "attempt": "%s", "url": "%s", "key": "%s"}\\n' \\
    "$payload" "$ACCEPTD_JOB_ID" "$ACCEPTD_JOB_TYPE" "$ACCEPTD_JOB_ATTEMPT" "$ACCEPTD_URL" "\${ACCEPTD_KEY:-}"
`,
        });
        const { d, c } = await setup();
        const payload = { text: 'héllo "wörld"', list: [1, 2.5, null, true], nested: { deep: { x: 'y' } } };
        const id = (await submit(c, { type: TYPE, payload })).json.id;
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], keyFlag: true });
        try {
            const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), 'the end');
            assert.equal(done.status, 'succeeded', JSON.stringify(done));
            assert.deepEqual(done.result, { payload, id, type: TYPE, attempt: '1', url: d.url, key: '' });
            await w.stopClean();
            assert.ok(!w.stderr.includes(WORKER_KEY) && !w.stderr.includes('Bearer'), `the worker logged its key:\n${w.stderr}`);
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('keeps a long command\'s lease alive with heartbeats even without progress lines', async () => {
        const dir = scriptDir({ 'job.sh': 'cat >/dev/null\nsleep 4\necho \'"slow"\'\n' });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {}, maxAttempts: 1 })).json.id;
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], leaseSeconds: 1 });
        try {
            const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), 'the end');
            assert.equal(done.status, 'succeeded', JSON.stringify(done));
            assert.equal(done.attempt, 1, 'the lease ran out and the job was leased again');
            assert.equal(done.result, 'slow');
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('a non-zero exit fails the job (maxAttempts 1) with the tail of stderr in error.detail', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
echo "FIRST-STDERR-LINE" >&2
i=0; while [ $i -lt 100 ]; do echo "filler line $i ................................................" >&2; i=$((i+1)); done
echo '{"partial": true}'
echo "disk on fire: LAST-STDERR-LINE" >&2
exit 3
`,
        });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {}, maxAttempts: 1 })).json.id;
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')] });
        try {
            const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), 'the end');
            assert.equal(done.status, 'failed', JSON.stringify(done));
            const e = done.error;
            assert.equal(e.code, 'command-failed', JSON.stringify(e));
            assert.equal(e.type, 'https://acceptd.dev/problems/command-failed');
            assert.match(e.detail, /^exit status 3: /, e.detail);
            assert.match(e.detail, /disk on fire: LAST-STDERR-LINE$/, e.detail);
            assert.ok(!e.detail.includes('FIRST-STDERR-LINE'), `detail is not a tail: ${e.detail.length} chars`);
            assert.ok(e.detail.length > 1000 && e.detail.length < 2300, `tail of ${e.detail.length} chars`);
            const res = await c.get(`/v1/jobs/${id}/result`);
            assert.equal(res.json?.code, 'command-failed', show(res));
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('output that is not JSON fails the job with a detail that says so', async () => {
        const dir = scriptDir({ 'job.sh': 'cat >/dev/null\necho "::progress 50"\necho "all done, no JSON here"\n' });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {}, maxAttempts: 1 })).json.id;
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')] });
        try {
            const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), 'the end');
            assert.equal(done.status, 'failed', JSON.stringify(done));
            assert.equal(done.error.code, 'output-not-json', JSON.stringify(done.error));
            assert.match(done.error.detail, /not JSON/, done.error.detail);
            assert.match(done.error.detail, /all done, no JSON here/, done.error.detail);
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('cancel of a running job: the command gets SIGTERM, the worker acknowledges, the job ends cancelled', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
trap 'echo terminated > "$TEST_DIR/term-$ACCEPTD_JOB_ID"; exit 143' TERM
echo "::progress 10 trap set"
while :; do sleep 0.1; done
`,
            'ok.sh': 'cat >/dev/null\necho \'{"next": true}\'\n',
            'route.sh': 'if [ -f "$TEST_DIR/use-ok" ]; then exec "$TEST_DIR/ok.sh"; else exec "$TEST_DIR/job.sh"; fi\n',
        });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {} })).json.id;
        // The worker learns of the cancel from its next heartbeat, every leaseSeconds/3.
        const w = startWorker(d, { dir, command: [path.join(dir, 'route.sh')], leaseSeconds: 3 * SLOW, grace: 5 });
        try {
            await waitJob(c, id, (j) => j.status === 'running' && j.progress === 10, 'running with the trap set');
            const res = expectStatus(await c.del(`/v1/jobs/${id}`), 202);
            assert.equal(res.json.cancelRequested, true, show(res));
            const done = await waitJob(c, id, (j) => j.status !== 'running', 'the end');
            assert.equal(done.status, 'cancelled', JSON.stringify(done));
            assert.equal(fs.readFileSync(path.join(dir, `term-${id}`), 'utf8').trim(), 'terminated');
            // Cancelled by the worker's acknowledgement, not by the lease running out.
            await waitUntil(() => w.stderr, (t) => /cancel accepted; the job is cancelled/.test(t), { what: 'the acknowledgement in the log' });
            // The slot is free again.
            fs.writeFileSync(path.join(dir, 'use-ok'), '');
            const next = (await submit(c, { type: TYPE, payload: {} })).json.id;
            const ok = await waitJob(c, next, (j) => ['succeeded', 'failed'].includes(j.status), 'the next job');
            assert.deepEqual(ok.result, { next: true }, JSON.stringify(ok));
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('SIGTERM to the worker lets a running command finish within the grace period, then exits 0', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
echo "::progress 5 waiting"
while [ ! -f "$TEST_DIR/go" ]; do sleep 0.05; done
echo '{"finished": true}'
`,
        });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {} })).json.id;
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], grace: 20 });
        try {
            await waitJob(c, id, (j) => j.status === 'running' && j.progress === 5, 'running');
            w.proc.kill('SIGTERM');
            await sleep(300);
            // Not leasing any more, but still running the command.
            assert.equal((await getJob(c, id)).status, 'running');
            const other = (await submit(c, { type: TYPE, payload: {} })).json.id;
            fs.writeFileSync(path.join(dir, 'go'), '');
            const r = await exitWithin(w, 15_000 * SLOW, 'after SIGTERM');
            assert.deepEqual(r, { code: 0, signal: null }, w.stderr);
            const done = await getJob(c, id);
            assert.equal(done.status, 'succeeded', JSON.stringify(done));
            assert.deepEqual(done.result, { finished: true });
            assert.equal((await getJob(c, other)).status, 'queued', 'a stopping worker leased a new job');
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('SIGTERM to the worker: a command that outlives the grace period is killed and its job requeued, then done by another worker', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
if [ "$ACCEPTD_JOB_ATTEMPT" = 1 ]; then
    trap 'echo "ignoring SIGTERM" >&2' TERM
    echo "::progress 1 stuck"
    while :; do sleep 0.1; done
fi
echo "{\\"attempt\\": $ACCEPTD_JOB_ATTEMPT}"
`,
        });
        const { d, c } = await setup();
        const id = (await submit(c, { type: TYPE, payload: {} })).json.id;
        const w1 = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], grace: 1 });
        let w2;
        try {
            await waitJob(c, id, (j) => j.status === 'running' && j.progress === 1, 'running');
            w1.proc.kill('SIGTERM');
            const r = await exitWithin(w1, 15_000 * SLOW, 'after SIGTERM');
            assert.deepEqual(r, { code: 0, signal: null }, w1.stderr);
            const requeued = await getJob(c, id);
            assert.equal(requeued.status, 'queued', `the job was orphaned or ended: ${JSON.stringify(requeued)}`);
            assert.equal(requeued.attempt, 1);
            w2 = startWorker(d, { dir, command: [path.join(dir, 'job.sh')] });
            const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), 'the second run');
            assert.equal(done.status, 'succeeded', JSON.stringify(done));
            assert.deepEqual(done.result, { attempt: 2 });
            await w2.stopClean();
        } finally {
            await w1.stop();
            await w2?.stop();
            await d.stop();
        }
    });

    it('--concurrency 3 runs three commands at once and never a fourth', async () => {
        const dir = scriptDir({
            'job.sh': `cat >/dev/null
date +%s%N > "$TEST_DIR/$ACCEPTD_JOB_ID.start"
n=0
while [ $n -lt 100 ] && [ "$(ls "$TEST_DIR" | grep -c '\\.start$')" -lt 3 ]; do sleep 0.05; n=$((n+1)); done
sleep 0.3
date +%s%N > "$TEST_DIR/$ACCEPTD_JOB_ID.end"
echo '{}'
`,
        });
        const { d, c } = await setup();
        const ids = [];
        for (let i = 0; i < 4; i++) ids.push((await submit(c, { type: TYPE, payload: { i } })).json.id);
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], concurrency: 3 });
        try {
            for (const id of ids) {
                const done = await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), `job ${id}`);
                assert.equal(done.status, 'succeeded', JSON.stringify(done));
            }
            const spans = ids.map((id) => ({
                start: BigInt(fs.readFileSync(path.join(dir, `${id}.start`), 'utf8').trim()),
                end: BigInt(fs.readFileSync(path.join(dir, `${id}.end`), 'utf8').trim()),
            }));
            const events = spans.flatMap((s) => [[s.start, 1], [s.end, -1]]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
            let now = 0;
            let peak = 0;
            for (const [, delta] of events) {
                now += delta;
                peak = Math.max(peak, now);
            }
            assert.equal(peak, 3, `at most ${peak} commands overlapped: ${JSON.stringify(spans.map((s) => [String(s.start), String(s.end)]))}`);
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('takes the next job in the same call as the report that ends the last one (:complete and :fail)', async () => {
        const dir = scriptDir({
            'job.sh': `payload=$(cat)
case "$payload" in *fail*) echo 'no luck' >&2; exit 1 ;; esac
echo '{"ok":true}'
`,
        });
        const { d, c } = await setup();
        const ids = [];
        for (const payload of [{ n: 1 }, { n: 2, fail: true }, { n: 3 }]) {
            ids.push((await submit(c, { type: TYPE, payload, maxAttempts: 1 })).json.id);
        }
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')] });
        try {
            const jobs = [];
            for (const id of ids) jobs.push(await waitJob(c, id, (j) => ['succeeded', 'failed'].includes(j.status), `job ${id}`));
            assert.deepEqual(jobs.map((j) => j.status), ['succeeded', 'failed', 'succeeded']);
            // Leased in the transaction of the report that ended the job before: started when that one finished.
            for (let i = 1; i < jobs.length; i++) {
                assert.equal(jobs[i].startedAt, jobs[i - 1].finishedAt, `job ${i + 1} was leased on its own: ${JSON.stringify(jobs)}`);
            }
            assert.equal(w.stderr.match(/the next job came with the (complete|fail)/g)?.length, 2, w.stderr);
            await w.stopClean();
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('a refused key stops the worker with status 1 and does not print the key', async () => {
        const dir = scriptDir({ 'job.sh': 'echo {}\n' });
        const { d } = await setup();
        const w = startWorker(d, { dir, command: [path.join(dir, 'job.sh')], key: 'not-a-key-s3cr3t' });
        try {
            const r = await exitWithin(w, 15_000 * SLOW, 'with a bad key');
            assert.equal(r.code, 1, w.stderr);
            assert.match(w.stderr, /401/, w.stderr);
            assert.ok(!w.stderr.includes('s3cr3t'), w.stderr);
        } finally {
            await w.stop();
            await d.stop();
        }
    });

    it('bad usage exits 2 before contacting anyone', async () => {
        for (const args of [
            ['worker', '--url', 'http://127.0.0.1:9', '--', 'true'],
            ['worker', '--url', 'http://127.0.0.1:9', '--type', 'x'],
            ['worker', '--type', 'x', '--', 'true'],
            ['worker', '--url', 'http://127.0.0.1:9', '--type', 'x', '--concurrency', '0', '--', 'true'],
            ['worker', '--url', 'http://127.0.0.1:9', '--type', 'x', '--', '/nonexistent/command'],
        ]) {
            const env = { ...process.env };
            delete env.ACCEPTD_URL;
            const proc = spawn(BIN, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
            let err = '';
            proc.stderr.on('data', (x) => {
                err += x;
            });
            const code = await new Promise((resolve) => proc.on('exit', (c) => resolve(c)));
            assert.equal(code, 2, `${args.join(' ')}: ${err}`);
            assert.match(err, /acceptd worker: /, err);
        }
    });
});
