// `acceptd schedules list|get|create|pause|resume|trigger|delete` against a real daemon: each verb's request and
// answer, the table output, and the usage errors (exit 2) and refusals (exit 7) the command line reports.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { BIN } from './lib/worker.mjs';
import { expectStatus } from './lib/jobs.mjs';

function run(d, key, args) {
    const env = { ...process.env, ACCEPTD_URL: d.url, ACCEPTD_KEY: key };
    const r = spawnSync(BIN, ['schedules', ...args], { env, encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, what: `acceptd schedules ${args.join(' ')}` };
}

function show(r) {
    return `${r.what}: exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

describe('acceptd schedules', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('create, get, pause, resume, trigger, list and delete, each printing what the server answers', async () => {
        const { c, keys } = tenant(d);
        let r = run(d, keys.c, ['create', '--id', 'nightly', '--cron', '0 2 * * *', '--timezone', 'Europe/Berlin',
            '--type', 'report.export', '--payload', '{"kind":"daily"}', '--overlap', 'allow', '--catchup-window', '10m']);
        assert.equal(r.code, 0, show(r));
        let s = JSON.parse(r.stdout);
        assert.equal(s.id, 'nightly');
        assert.equal(s.cron, '0 2 * * *');
        assert.equal(s.timezone, 'Europe/Berlin');
        assert.deepEqual(s.job, { type: 'report.export', payload: { kind: 'daily' } });
        assert.equal(s.overlap, 'allow');
        assert.equal(s.catchupWindow, '10m');
        assert.equal(s.upcoming.length, 5);
        r = run(d, keys.c, ['pause', 'nightly']);
        assert.equal(r.code, 0, show(r));
        assert.equal(JSON.parse(r.stdout).paused, true);
        assert.equal(JSON.parse(r.stdout).nextRunAt, null);
        r = run(d, keys.c, ['resume', 'nightly']);
        assert.equal(JSON.parse(r.stdout).paused, false, show(r));
        r = run(d, keys.c, ['trigger', 'nightly']);
        assert.equal(r.code, 0, show(r));
        s = JSON.parse(r.stdout);
        assert.equal(s.recentRuns.length, 1);
        const job = expectStatus(await c.get(`/v1/jobs/${s.recentRuns[0].jobId}`), 200).json;
        assert.deepEqual(job.schedule, { id: 'nightly', fireTime: s.recentRuns[0].fireTime });
        r = run(d, keys.c, ['get', 'nightly', '-o', 'table']);
        assert.equal(r.code, 0, show(r));
        const lines = r.stdout.trim().split('\n');
        assert.match(lines[0], /^ID\s+SCHEDULE\s+TIMEZONE\s+PAUSED\s+NEXT\s+LASTJOB\s+FIRES\s+SKIPS$/, show(r));
        assert.match(lines[1], new RegExp(`^nightly\\s+0 2 \\* \\* \\*\\s+Europe/Berlin\\s+no\\s+\\S+Z\\s+${s.recentRuns[0].jobId}\\s+1\\s+0$`), show(r));
        r = run(d, keys.c, ['create', '--every', '5m', '--type', 'report.export', '--paused']);
        assert.equal(r.code, 0, show(r));
        assert.match(JSON.parse(r.stdout).id, /^sch_/);
        r = run(d, keys.c, ['list']);
        assert.equal(JSON.parse(r.stdout).items.length, 2, show(r));
        r = run(d, keys.c, ['delete', 'nightly']);
        assert.equal(r.code, 0, show(r));
        assert.equal(r.stdout, '');
        r = run(d, keys.c, ['get', 'nightly']);
        assert.equal(r.code, 7, show(r));
        assert.match(r.stderr, /404/, show(r));
    });

    it('a refusal is printed with its problem and exits 7; a bad command line exits 2', async () => {
        const { keys } = tenant(d);
        let r = run(d, keys.c, ['create', '--cron', 'not a cron', '--type', 'report.export']);
        assert.equal(r.code, 7, show(r));
        assert.match(r.stderr, /\/cron/, show(r));
        for (const args of [[], ['frobnicate'], ['get'], ['list', 'x'], ['create', '--every', '1m'],
            ['pause', 'x', '--every', '1m'], ['create', '--type', 't', '--payload', '[1]']]) {
            r = run(d, keys.c, args);
            assert.equal(r.code, 2, show(r));
            assert.match(r.stderr, /usage: acceptd schedules/, show(r));
        }
    });
});
