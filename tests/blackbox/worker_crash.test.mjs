// Crashes: workers and the daemon killed with SIGKILL in the middle of work. Checked through the HTTP API
// (jobs and their attempt history) and the log the job commands write: every job ends succeeded, each
// job's result is accepted exactly once, and no job is ever held by two live leases.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it, startDaemon, api } from './lib/daemon.mjs';
import { killWorkers, spawnWorker } from './lib/worker.mjs';
import {
    TERMINAL, assertProblem, complete, expectStatus, getJob, heartbeat, lease, listAll, mapLimit, show, sleep, submit, waitUntil,
} from './lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1; // the ASan build is slower
const TYPE = 'crash.job';
const CONFIG = `keys:
  - { key: "kc", tenant: crash, role: client }
  - { key: "kw", tenant: crash, role: worker }
types:
  ${TYPE}: { maxAttempts: 5 }
retryBackoff: 200ms
limits: { maxWaitSeconds: 5 }
`;

const orphanGroups = new Set(); // process groups of commands whose worker was killed
function killLeftovers() {
    killWorkers();
    for (const g of orphanGroups) {
        try {
            process.kill(-g, 'SIGKILL');
        } catch {
            /* already gone */
        }
    }
    orphanGroups.clear();
}
process.on('exit', killLeftovers);

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-crash-'));
after(() => {
    killLeftovers();
    if (!process.env.ACCEPTD_KEEP_TMP) fs.rmSync(tmpRoot, { recursive: true, force: true });
});

/** Start `acceptd worker` for TYPE running command, with TEST_DIR in its environment. */
function startWorker(d, { dir, command, name, concurrency = 2, leaseSeconds = 2 }) {
    const args = ['worker', '--url', d.url, '--type', TYPE, '--concurrency', String(concurrency), '--lease-seconds',
        String(leaseSeconds), '--grace', '5', '--lease-wait', '1', '--name', name, '--', ...command];
    const env = { ...process.env, TEST_DIR: dir, ACCEPTD_KEY: 'kw' };
    delete env.ACCEPTD_URL;
    const w = spawnWorker(args, env);
    w.name = name;
    return w;
}

/** Lines of a log file split in fields; [] while it does not exist. */
function readLog(file) {
    if (!fs.existsSync(file)) return [];
    return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => l.split(' '));
}

/** Every attempt row of a job, oldest first (asserts 200). */
async function attemptsOf(c, id) {
    const res = expectStatus(await c.get(`/v1/jobs/${id}/attempts`), 200);
    assert.ok(Array.isArray(res.json?.attempts), show(res));
    return res.json.attempts;
}

/**
 * One live lease at a time: every row but the last ended, and no later than the next one started; attempt
 * numbers count up by one from 1 (these tests never release).
 */
function assertOneLeaseAtATime(id, rows) {
    const ctx = `${id}: ${JSON.stringify(rows)}`;
    rows.forEach((r, i) => assert.equal(r.attempt, i + 1, `attempt numbers: ${ctx}`));
    for (let i = 0; i + 1 < rows.length; i++) {
        assert.notEqual(rows[i].endedAt, null, `an earlier lease is still open: ${ctx}`);
        assert.ok(Date.parse(rows[i].endedAt) <= Date.parse(rows[i + 1].startedAt), `leases ${i + 1} and ${i + 2} overlap: ${ctx}`);
    }
}

describe('worker crashes', () => {
    it('kill -9 of two of four `acceptd worker`s during 500 jobs: all succeed, each result accepted once, never two live leases', { timeout: 150_000 }, async () => {
        const JOBS = 500;
        const dir = fs.mkdtempSync(path.join(tmpRoot, 'w-'));
        const script = path.join(dir, 'job.sh');
        fs.writeFileSync(script, `#!/bin/sh
# Shell builtins only, but for sleep: the machine may be small and 8 of these run at once.
read -r p
s=\${p#*sleep???}
s=\${s%%[!0-9.]*}
echo "$ACCEPTD_JOB_ID $ACCEPTD_JOB_ATTEMPT $PPID $$" >> "$TEST_DIR/start.log"
sleep "\${s:-0.05}"
echo "$ACCEPTD_JOB_ID $ACCEPTD_JOB_ATTEMPT" >> "$TEST_DIR/done.log"
printf '{"ok":true,"job":"%s","attempt":%s}\\n' "$ACCEPTD_JOB_ID" "$ACCEPTD_JOB_ATTEMPT"
`, { mode: 0o755 });
        const startLog = path.join(dir, 'start.log');
        const doneLog = path.join(dir, 'done.log');

        const d = await startDaemon({ config: CONFIG });
        const c = api(d, 'kc');
        const workers = [0, 1, 2, 3].map((i) => startWorker(d, { dir, command: [script], name: `w${i}` }));
        const killed = [];
        try {
            // Submit quickly, 16 at a time, while the workers already take jobs.
            const ids = await mapLimit(Array.from({ length: JOBS }, (_, i) => i), 16, async (i) => {
                const ms = 20 + ((i * 37) % 81);
                return (await submit(c, { type: TYPE, payload: { i, sleep: (ms / 1000).toFixed(3) } })).json.id;
            });
            assert.equal(new Set(ids).size, JOBS);

            // Kill w0 once 100 jobs are done and w1 once 200 are, each while it runs a command.
            for (const [victim, after] of [[workers[0], 100], [workers[1], 200]]) {
                await waitUntil(() => readLog(doneLog).length, (n) => n >= after, { timeoutMs: 60_000 * SLOW, intervalMs: 20, what: `${after} jobs done` });
                await waitUntil(() => {
                    const done = new Set(readLog(doneLog).map(([id, a]) => `${id} ${a}`));
                    return readLog(startLog).filter(([id, a, ppid]) => Number(ppid) === victim.proc.pid && !done.has(`${id} ${a}`)).length;
                }, (n) => n > 0, { timeoutMs: 20_000 * SLOW, intervalMs: 5, what: `${victim.name} running a command` });
                victim.proc.kill('SIGKILL');
                await victim.exited;
                killed.push(victim);
                // Its commands go on as orphans: remember their process groups, to kill what is left at the end.
                const done = new Set(readLog(doneLog).map(([id, a]) => `${id} ${a}`));
                for (const [id, a, ppid, pid] of readLog(startLog)) {
                    if (Number(ppid) === victim.proc.pid && !done.has(`${id} ${a}`)) orphanGroups.add(Number(pid));
                }
            }

            // Every job reaches a final state; a killed worker's jobs come back when their 2 s leases run out.
            const deadline = Date.now() + 120_000;
            let jobs;
            for (;;) {
                jobs = await listAll(c, `type=${TYPE}`);
                if (jobs.length === JOBS && jobs.every((j) => TERMINAL.includes(j.status))) break;
                const open = jobs.filter((j) => !TERMINAL.includes(j.status));
                assert.ok(Date.now() < deadline, `not all jobs ended within 120 s: ${jobs.length} listed, ${open.length} open, e.g. ${JSON.stringify(open.slice(0, 3))}`);
                await sleep(250);
            }
            for (const w of workers.slice(2)) {
                const r = await w.stop();
                assert.deepEqual(r, { code: 0, signal: null }, `${w.name} exit\n${w.stderr.slice(-4000)}`);
            }

            const notOk = jobs.filter((j) => j.status !== 'succeeded');
            assert.deepEqual(notOk.map((j) => `${j.id} ${j.status} ${JSON.stringify(j.error ?? null)}`), [], 'jobs that did not succeed');
            assert.deepEqual(new Set(jobs.map((j) => j.id)), new Set(ids), 'the listed jobs are not the submitted ones');

            const histories = await mapLimit(ids, 16, async (id) => ({ job: await getJob(c, id), rows: await attemptsOf(c, id) }));
            const ran = new Map(); // "id attempt" -> how many times a command started for it
            for (const [id, a] of readLog(startLog)) ran.set(`${id} ${a}`, (ran.get(`${id} ${a}`) ?? 0) + 1);
            const finished = new Set(readLog(doneLog).map(([id, a]) => `${id} ${a}`));
            const expiredBy = new Map();
            for (const { job, rows } of histories) {
                const ctx = `${job.id}: ${JSON.stringify(rows)}`;
                assertOneLeaseAtATime(job.id, rows);
                assert.equal(rows.length, job.attempt, `job.attempt ${job.attempt} but ${rows.length} rows: ${ctx}`);
                const won = rows.filter((r) => r.outcome === 'succeeded');
                assert.equal(won.length, 1, `the result was accepted ${won.length} times: ${ctx}`);
                assert.equal(rows.at(-1).outcome, 'succeeded', ctx);
                // Every earlier lease was lost with its worker.
                for (const r of rows.slice(0, -1)) {
                    assert.equal(r.outcome, 'expired', `an earlier lease ended ${r.outcome}: ${ctx}`);
                    assert.ok(killed.some((w) => w.name === r.worker), `a lease of a live worker expired: ${ctx}`);
                    expiredBy.set(r.worker, (expiredBy.get(r.worker) ?? 0) + 1);
                }
                // The accepted result is the one the command of that very attempt printed.
                const a = won[0].attempt;
                assert.deepEqual(job.result, { ok: true, job: job.id, attempt: a }, ctx);
                assert.ok(finished.has(`${job.id} ${a}`), `no command finished attempt ${a}: ${ctx}`);
                assert.equal(job.finishedAt, won[0].endedAt, ctx);
            }
            for (const [key, n] of ran) assert.equal(n, 1, `a command ran ${n} times for ${key}`);
            for (const w of killed) assert.ok((expiredBy.get(w.name) ?? 0) > 0, `killed ${w.name} held no lease: ${JSON.stringify([...expiredBy])}`);
            assert.deepEqual(await d.stop(), { code: 0, signal: null }, `daemon exit\n${d.stderr.slice(-4000)}`);
        } finally {
            for (const w of workers) await w.stop('SIGKILL');
            killLeftovers();
            await d.stop();
        }
    });

    it('kill -9 of the daemon with 10 jobs leased and 5 completed: after restart nothing is lost and the leases live on', async () => {
        const LEASE_S = 3 * SLOW;
        const d = await startDaemon({ config: CONFIG });
        const c = api(d, 'kc');
        const w = api(d, 'kw');
        try {
            const ids = [];
            for (let i = 0; i < 10; i++) ids.push((await submit(c, { type: TYPE, payload: { i } })).json.id);
            const res = expectStatus(await lease(w, TYPE, { max: 10, wait: 0, leaseSeconds: LEASE_S, worker: 'before-crash' }), 200);
            const leases = res.json.leases;
            assert.deepEqual(new Set(leases.map((l) => l.job.id)), new Set(ids), show(res));
            const done = leases.slice(0, 5);
            const open = leases.slice(5);
            for (const l of done) await complete(w, l.job.id, l.leaseId, { result: { before: l.job.payload.i } });

            await d.kill9();
            await d.restart();

            // A lease that was live at the crash still is: the worker's heartbeat works.
            const [kept, ...lost] = open;
            const hb = expectStatus(await heartbeat(w, kept.job.id, kept.leaseId, { progress: 50, leaseSeconds: 60 }), 200);
            assert.equal(hb.json.job.status, 'running', show(hb));
            assert.ok(Date.parse(hb.json.leaseExpiresAt) > Date.parse(kept.leaseExpiresAt) + 30_000, `heartbeat did not extend the lease: ${show(hb)}`);

            for (const l of done) {
                const j = await getJob(c, l.job.id);
                assert.equal(j.status, 'succeeded', JSON.stringify(j));
                assert.deepEqual(j.result, { before: l.job.payload.i });
                assert.deepEqual((await attemptsOf(c, l.job.id)).map((r) => r.outcome), ['succeeded']);
            }
            for (const l of lost) {
                const j = await getJob(c, l.job.id);
                assert.equal(j.status, 'running', `lease of ${l.job.id} did not survive the crash: ${JSON.stringify(j)}`);
                assert.equal(j.attempt, 1);
                assert.deepEqual((await attemptsOf(c, l.job.id)).map((r) => [r.worker, r.outcome]), [['before-crash', null]]);
            }
            // The running jobs are not handed out a second time.
            const early = await lease(w, TYPE, { max: 10, wait: 0 });
            assert.equal(early.status, 204, `a leased job was leased again after the restart: ${show(early)}`);

            // The kept lease finishes its job.
            const keptDone = await complete(w, kept.job.id, kept.leaseId, { result: { kept: true } });
            assert.equal(keptDone.status, 'succeeded');

            // The others come back when their leases run out, and are done again.
            for (const l of lost) {
                const j = await waitUntil(() => getJob(c, l.job.id), (x) => x.status !== 'running',
                    { timeoutMs: (LEASE_S + 10) * 1000, intervalMs: 50, what: `the expiry of ${l.job.id}'s lease` });
                assert.equal(j.status, 'queued', JSON.stringify(j));
                const rows = await attemptsOf(c, l.job.id);
                assert.deepEqual(rows.map((r) => r.outcome), ['expired'], JSON.stringify(rows));
                const late = Date.parse(rows[0].endedAt) - Date.parse(l.leaseExpiresAt);
                assert.ok(late >= 0 && late <= 3000 * SLOW, `expired ${late} ms after ${l.leaseExpiresAt}: ${JSON.stringify(rows)}`);
                assertProblem(await heartbeat(w, l.job.id, l.leaseId), 409, 'stale-lease');
            }
            const again = expectStatus(await lease(w, TYPE, { max: 10, wait: 0, worker: 'after-crash' }), 200);
            assert.deepEqual(new Set(again.json.leases.map((l) => l.job.id)), new Set(lost.map((l) => l.job.id)), show(again));
            for (const l of again.json.leases) {
                assert.equal(l.job.attempt, 2);
                await complete(w, l.job.id, l.leaseId, { result: { after: l.job.payload.i } });
                const rows = await attemptsOf(c, l.job.id);
                assertOneLeaseAtATime(l.job.id, rows);
                assert.deepEqual(rows.map((r) => [r.worker, r.outcome]), [['before-crash', 'expired'], ['after-crash', 'succeeded']]);
            }

            const all = await listAll(c);
            assert.equal(all.length, 10, JSON.stringify(all.map((j) => j.id)));
            assert.deepEqual(all.filter((j) => j.status !== 'succeeded').map((j) => `${j.id} ${j.status}`), []);
            assert.deepEqual((await attemptsOf(c, kept.job.id)).map((r) => r.outcome), ['succeeded']);
            assert.deepEqual(await d.stop(), { code: 0, signal: null }, `daemon exit\n${d.stderr.slice(-4000)}`);
        } finally {
            await d.stop();
        }
    });
});
