// `acceptd batch submit FILE [--wait]` against a real daemon: the batch printed as created, --wait following it to
// its end with the exit status of its outcome (0 succeeded, 1 failed, 4 partialSuccess), a refused batch (exit 7)
// and usage errors (exit 2).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { BIN } from './lib/worker.mjs';
import { complete, expectStatus, fail, leaseOne } from './lib/jobs.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-cli-batch-'));
function file(name, v) {
    const p = path.join(tmp, name);
    fs.writeFileSync(p, JSON.stringify(v));
    return p;
}

function env(d, key) {
    return { ...process.env, ACCEPTD_URL: d.url, ACCEPTD_KEY: key };
}

function run(d, key, args) {
    const r = spawnSync(BIN, ['batch', ...args], { env: env(d, key), encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, what: `acceptd batch ${args.join(' ')}` };
}

/** Start `acceptd batch ... --wait` in the background; resolves with its outcome when it exits. */
function start(d, key, args) {
    const p = spawn(BIN, ['batch', ...args], { env: env(d, key) });
    let stdout = '', stderr = '';
    p.stdout.on('data', (b) => { stdout += b; });
    p.stderr.on('data', (b) => { stderr += b; });
    const killer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    return new Promise((resolve) => p.on('exit', (code) => {
        clearTimeout(killer);
        resolve({ code, stdout, stderr, what: `acceptd batch ${args.join(' ')}` });
    }));
}

const show = (r) => `${r.what}: exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;

describe('acceptd batch', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(async () => {
        await d?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('submit prints the batch; --wait follows it and exits by its outcome', async () => {
        const { c, w, keys } = tenant(d);
        let r = run(d, keys.c, ['submit', file('a.json', { jobs: [{ type: 'report.export' }] })]);
        assert.equal(r.code, 0, show(r));
        const created = JSON.parse(r.stdout);
        assert.equal(created.status, 'running');
        assert.equal(created.total, 1);
        expectStatus(await c.get(`/v1/batches/${created.id}`), 200);
        const l0 = await leaseOne(w, 'report.export');
        await complete(w, l0.job.id, l0.leaseId);
        // An array of jobs is a batch too. Two jobs: one succeeds, one fails: partialSuccess, exit 4.
        const waiting = start(d, keys.c, ['submit', file('b.json', [{ type: 'email.send' }, { type: 'email.send', maxAttempts: 1 }]), '--wait']);
        const l1 = await leaseOne(w, 'email.send', { wait: 5 });
        await complete(w, l1.job.id, l1.leaseId);
        const l2 = await leaseOne(w, 'email.send', { wait: 5 });
        await fail(w, l2.job.id, l2.leaseId, { retryable: false });
        r = await waiting;
        assert.equal(r.code, 4, show(r));
        const end = JSON.parse(r.stdout);
        assert.equal(end.status, 'partialSuccess');
        assert.deepEqual([end.counts.succeeded, end.counts.failed], [1, 1]);
        assert.match(r.stderr, /partialSuccess 100%/, show(r));
        // All succeeded: exit 0.
        const ok = start(d, keys.c, ['submit', file('c.json', [{ type: 'image.resize' }]), '--wait']);
        const l3 = await leaseOne(w, 'image.resize', { wait: 5 });
        await complete(w, l3.job.id, l3.leaseId);
        r = await ok;
        assert.equal(r.code, 0, show(r));
        assert.equal(JSON.parse(r.stdout).status, 'succeeded');
    });

    it('a refused batch exits 7 with its problem; bad command lines and files exit 2', async () => {
        const { keys } = tenant(d);
        let r = run(d, keys.c, ['submit', file('bad.json', { jobs: [{ type: 'report.export' }, { payload: {} }] })]);
        assert.equal(r.code, 7, show(r));
        assert.match(r.stderr, /\/jobs\/1\/type/, show(r));
        r = run(d, keys.c, ['submit', file('nope.json', 'text')]);
        assert.equal(r.code, 2, show(r));
        r = run(d, keys.c, ['submit', path.join(tmp, 'missing.json')]);
        assert.equal(r.code, 2, show(r));
        r = run(d, keys.c, ['send', file('x.json', [])]);
        assert.equal(r.code, 2, show(r));
        r = run(d, keys.c, ['submit', file('y.json', []), '--timeout', '5']);
        assert.equal(r.code, 2, show(r));
    });
});
