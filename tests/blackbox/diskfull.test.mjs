// Disk full: the SQLite store on a small file system of its own (a 4 MiB tmpfs the test mounts; the test runs as
// root and fails, rather than skips, where it cannot mount). Submits fill it; every refused submit is a 503
// storage-full problem and never a 202, /readyz says storage-full too, and once space is freed both recover for
// good, without a request to find out; every job that got a 202 is there after a kill -9 and a restart.
// Always the SQLite store, whatever the run's backend: PostgreSQL's disk is its server's business.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it, api, startDaemon, standardConfig } from './lib/daemon.mjs';
import { assertProblem, assertRetryAfter, mapLimit, show, waitUntil } from './lib/jobs.mjs';

const VOLUME = '4m';
const BALLAST = 2 * 1024 * 1024; // freed once the store has filled the rest
const PAD = 'x'.repeat(3000); // maxBodyBytes is 4096 in the standard config
const FILL_LIMIT = 4000; // submits before giving up on filling 2 MiB (about 600 do it)
const AFTER = 500; // submits that must all be accepted once the ballast is gone

describe('a data dir on a small file system that fills up', () => {
    let mnt;
    let mounted = false;
    let d;
    const accepted = new Map(); // id -> nonce of every 202

    before(async () => {
        mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-diskfull-'));
        execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${VOLUME},mode=0700`, 'tmpfs', mnt], { stdio: 'pipe' });
        mounted = true;
        fs.writeFileSync(path.join(mnt, 'ballast'), Buffer.alloc(BALLAST, 1));
        d = await startDaemon({ config: standardConfig(), dataDir: path.join(mnt, 'data'), store: null });
    });
    after(async () => {
        await d?.kill9();
        if (mounted) {
            try {
                execFileSync('umount', [mnt], { stdio: 'pipe' });
            } catch {
                execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
            }
        }
        if (mnt) fs.rmSync(mnt, { recursive: true, force: true });
    });

    /** Submit n jobs, 8 at a time, recording each 202; returns the answers that were not 202. */
    async function submitMany(c, n, { pad = PAD, stopWhen = () => false } = {}) {
        const refused = [];
        let stop = false;
        await mapLimit(Array.from({ length: n }, (_, i) => i), 8, async (i) => {
            if (stop) return;
            const nonce = `n${i}-${Math.random().toString(36).slice(2)}`;
            const res = await c.post('/v1/jobs', { type: 'report.export', payload: { nonce, pad } });
            if (res.status === 202) accepted.set(res.json.id, nonce);
            else refused.push(res);
            if (stopWhen(refused)) stop = true;
        });
        return refused;
    }

    it('refuses submits with storage-full while full, is not ready, and recovers for good once space is freed', async () => {
        const c = api(d, 'ka');
        const ready = api(d);
        const adm = api(d, 'adm');
        const storeErrors = async () => Number(/^acceptd_store_errors_total (\d+)$/m.exec((await adm.get('/metrics')).text)?.[1]);
        assert.equal((await ready.get('/readyz')).status, 200);
        assert.equal(await storeErrors(), 0);

        // Fill it: stop once 40 submits were refused.
        const refused = await submitMany(c, FILL_LIMIT, { stopWhen: (r) => r.length >= 40 });
        assert.ok(refused.length >= 40, `the file system never filled: ${accepted.size} jobs accepted, ${refused.length} refused`);
        for (const res of refused) {
            assertProblem(res, 503, 'storage-full');
            assertRetryAfter(res);
        }
        const filled = accepted.size;
        // GET /metrics counts what the store refused.
        const errors = await storeErrors();
        assert.ok(errors > 0, `acceptd_store_errors_total is ${errors} after ${refused.length} writes failed`);

        // Not ready while writes fail for want of space: a load balancer sends the submits elsewhere.
        const rz = await ready.get('/readyz');
        assertProblem(rz, 503, 'storage-full');

        // Free space; with no request coming, readiness comes back by itself.
        fs.unlinkSync(path.join(mnt, 'ballast'));
        await waitUntil(() => ready.get('/readyz'), (r) => r.status === 200, { what: '/readyz to answer 200 once space was freed' });

        // Submits go in again, for good: all of them.
        const later = await submitMany(c, AFTER, { pad: '' });
        assert.deepEqual(later.map(show), [], `refused after space was freed (${accepted.size - filled} accepted since)`);
        assert.equal((await ready.get('/readyz')).status, 200);

        // Durability: every 202 is there after a crash.
        await d.kill9();
        await d.restart();
        const ids = [...accepted.keys()];
        const missing = [];
        await mapLimit(ids, 16, async (id) => {
            const res = await c.get(`/v1/jobs/${id}`);
            if (res.status !== 200 || res.json.payload?.nonce !== accepted.get(id)) missing.push(show(res));
        });
        assert.deepEqual(missing.slice(0, 5), [], `${missing.length} of ${ids.length} accepted jobs are missing or changed after a restart`);

        // A clean stop, and (under the sanitizers) nothing reported on the way.
        const exit = await d.stop();
        assert.equal(exit.code, 0, `the daemon did not stop cleanly: ${JSON.stringify(exit)}`);
        assert.doesNotMatch(d.stderr, /AddressSanitizer|LeakSanitizer|runtime error:/, 'a sanitizer reported something');
    });
});
