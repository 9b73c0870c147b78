// `acceptd queues list|get|pause|resume|set` against a real daemon: each verb's request and answer, the table
// output, and the usage errors (exit 2) and refusals (exit 7) the command line reports.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { BIN } from './lib/worker.mjs';
import { expectStatus, submit } from './lib/jobs.mjs';

function run(d, key, args) {
    const env = { ...process.env, ACCEPTD_URL: d.url, ACCEPTD_KEY: key };
    const r = spawnSync(BIN, ['queues', ...args], { env, encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, what: `acceptd queues ${args.join(' ')}` };
}

function show(r) {
    return `${r.what}: exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

describe('acceptd queues', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('pause, resume and set change the queue and print it; get and list read it', async () => {
        const { c, keys } = tenant(d);
        await submit(c, { type: 'report.export', payload: {} });
        let r = run(d, keys.a, ['pause', 'report.export']);
        assert.equal(r.code, 0, show(r));
        assert.equal(JSON.parse(r.stdout).paused, true, show(r));
        r = run(d, keys.a, ['set', 'report.export', '--concurrency', '4', '--rate-limit', '10/1m']);
        assert.equal(r.code, 0, show(r));
        const q = JSON.parse(r.stdout);
        assert.equal(q.concurrency, 4);
        assert.deepEqual(q.rateLimit, { limit: 10, period: '1m' });
        assert.equal(q.paused, true, 'set changed what it was not given');
        r = run(d, keys.c, ['get', 'report.export']);
        assert.equal(r.code, 0, show(r));
        assert.deepEqual(JSON.parse(r.stdout).counts, { queued: 1, running: 0, scheduled: 0, waiting: 1 });
        r = run(d, keys.a, ['resume', 'report.export']);
        assert.equal(r.code, 0, show(r));
        assert.equal(JSON.parse(r.stdout).paused, false);
        r = run(d, keys.a, ['set', 'report.export', '--concurrency', 'none', '--rate-limit', 'none']);
        assert.equal(r.code, 0, show(r));
        assert.equal(JSON.parse(r.stdout).concurrency, null);
        assert.equal(JSON.parse(r.stdout).rateLimit, null);
        r = run(d, keys.c, ['list', '--output', 'table']);
        assert.equal(r.code, 0, show(r));
        const lines = r.stdout.trim().split('\n');
        assert.match(lines[0], /^TYPE\s+PAUSED\s+CONCURRENCY\s+RATE\s+QUEUED\s+RUNNING\s+WAITING\s+SCHEDULED\s+WAITINGFOR$/, show(r));
        assert.match(lines[1], /^report\.export\s+no\s+-\s+-\s+1\s+0\s+0\s+0\s+-$/, show(r));
        r = run(d, keys.c, ['list']);
        assert.deepEqual(JSON.parse(r.stdout).queues.map((x) => x.type), ['report.export']);
        expectStatus(await c.get('/v1/queues/report.export'), 200);
    });

    it('a refusal is printed with its problem and exits 7; a bad command line exits 2 and sends nothing', async () => {
        const { keys } = tenant(d);
        let r = run(d, keys.c, ['pause', 'report.export']);
        assert.equal(r.code, 7, show(r));
        assert.match(r.stderr, /403/, show(r));
        r = run(d, keys.a, ['set', 'report.export', '--rate-limit', '5/soon']);
        assert.equal(r.code, 7, show(r));
        assert.match(r.stderr, /\/rateLimit\/period/, show(r));
        for (const [args, msg] of [
            [['set', 'report.export'], /set needs at least one/],
            [['set', 'report.export', '--concurrency', 'x'], /--concurrency: expected a whole number or none/],
            [['set', 'report.export', '--rate-limit', '5'], /--rate-limit: expected N\/PERIOD or none/],
            [['get'], /give one type/],
            [['pause', 'report.export', '--concurrency', '3'], /go with set/],
            [['frob'], /unknown verb/],
        ]) {
            r = run(d, keys.a, args);
            assert.equal(r.code, 2, show(r));
            assert.match(r.stderr, msg, show(r));
            assert.match(r.stderr, /usage: acceptd queues/, show(r));
        }
        r = run(d, keys.a, ['get', 'report.export']);
        assert.equal(JSON.parse(r.stdout).paused, false, 'a refused command changed the queue');
    });
});
