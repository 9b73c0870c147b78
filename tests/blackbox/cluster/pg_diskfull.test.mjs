// PostgreSQL out of space: the store's database lives in a tablespace on a small file system of its own (a tmpfs
// the test mounts, on a PostgreSQL server it starts itself), while the server's write-ahead log stays on the disk
// of its data directory, as when the volume of a tablespace fills up. Submits fill it; every refused submit is a
// 503 storage-full problem with Retry-After and never a 202, /readyz says storage-full too (SQLSTATE class 53 takes
// the path of SQLite's full disk, diskfull.test.mjs), and once space is freed both recover by themselves; every job
// that got a 202 is there. It runs in the PostgreSQL pass only (`make blackbox-pg`), as root (to mount), and fails
// rather than skips where it cannot mount.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, api, startDaemon, standardConfig } from '../lib/daemon.mjs';
import { assertProblem, assertRetryAfter, mapLimit, show, waitUntil } from '../lib/jobs.mjs';

const PG_SH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'scripts', 'pg.sh');
const VOLUME = '24m'; // CREATE DATABASE copies template1 (about 8 MiB) into the tablespace
const ROOM = 3 * 1024 * 1024; // left free for the jobs once the store is up; the rest is ballast
const FILL_LIMIT = 6000; // submits before giving up on filling ROOM (about 1,000 do it)
const AFTER = 300; // submits that must all be accepted once the ballast is gone
const pad = () => crypto.randomBytes(2200).toString('base64'); // random: PostgreSQL would compress a repeat

describe('a PostgreSQL tablespace on a small file system that fills up', () => {
    let base;
    let mnt;
    let pgDir;
    let mounted = false;
    let d;
    const accepted = new Map(); // id -> nonce of every 202
    const pgsh = (...args) => execFileSync('bash', [PG_SH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
    const psql = (url, sql) => execFileSync('psql', ['-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql, url], { stdio: 'pipe' }).toString().trim();

    before(async () => {
        base = fs.mkdtempSync('/tmp/acceptd-pgfull-');
        fs.chmodSync(base, 0o755); // the server runs as postgres and must reach the tablespace
        pgDir = path.join(base, 'pg');
        mnt = path.join(base, 'mnt');
        fs.mkdirSync(mnt);
        execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${VOLUME},mode=0755`, 'tmpfs', mnt], { stdio: 'pipe' });
        mounted = true;
        const ts = path.join(mnt, 'ts');
        fs.mkdirSync(ts, { mode: 0o700 });
        const uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
        const gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
        fs.chownSync(ts, uid, gid);
        const admin = pgsh('start', pgDir, String(57000 + (process.pid % 1000)));
        psql(admin, `CREATE TABLESPACE small LOCATION '${ts}'`);
        psql(admin, 'CREATE DATABASE acceptd TABLESPACE small');
        const store = admin.replace('/postgres?', '/acceptd?');
        d = await startDaemon({ config: standardConfig(), store });
        const st = fs.statfsSync(mnt);
        const free = st.bavail * st.bsize;
        assert.ok(free > ROOM, `only ${free} bytes free on the tablespace's file system`);
        fs.writeFileSync(path.join(mnt, 'ballast'), Buffer.alloc(free - ROOM, 1));
    });
    after(async () => {
        await d?.kill9();
        if (pgDir) pgsh('stop', pgDir);
        if (mounted) {
            try {
                execFileSync('umount', [mnt], { stdio: 'pipe' });
            } catch {
                execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
            }
        }
        if (base) fs.rmSync(base, { recursive: true, force: true });
    });

    /** Submit n jobs, 8 at a time, recording each 202; returns the answers that were not 202. */
    async function submitMany(c, n, { big = true, stopWhen = () => false } = {}) {
        const refused = [];
        let stop = false;
        await mapLimit(Array.from({ length: n }, (_, i) => i), 8, async (i) => {
            if (stop) return;
            const nonce = `n${i}-${Math.random().toString(36).slice(2)}`;
            const res = await c.post('/v1/jobs', { type: 'report.export', payload: { nonce, pad: big ? pad() : '' } });
            if (res.status === 202) accepted.set(res.json.id, nonce);
            else refused.push(res);
            if (stopWhen(refused)) stop = true;
        });
        return refused;
    }

    it('refuses submits with storage-full while full, is not ready, and recovers by itself once space is freed', { timeout: 240_000 }, async () => {
        const c = api(d, 'ka');
        const ready = api(d);
        assert.equal((await ready.get('/readyz')).status, 200);

        // Fill it: stop once 40 submits were refused.
        const refused = await submitMany(c, FILL_LIMIT, { stopWhen: (r) => r.length >= 40 });
        assert.ok(refused.length >= 40, `the tablespace never filled: ${accepted.size} jobs accepted, ${refused.length} refused`);
        for (const res of refused) {
            assertProblem(res, 503, 'storage-full');
            assertRetryAfter(res);
        }
        const filled = accepted.size;

        // Not ready while writes fail for want of space, also with no submit coming (the probe keeps failing).
        assertProblem(await ready.get('/readyz'), 503, 'storage-full');
        await new Promise((r) => setTimeout(r, 1500));
        assertProblem(await ready.get('/readyz'), 503, 'storage-full');

        // Free space; with no request coming, readiness comes back by itself.
        fs.unlinkSync(path.join(mnt, 'ballast'));
        await waitUntil(() => ready.get('/readyz'), (r) => r.status === 200, { what: '/readyz to answer 200 once space was freed' });

        // Submits go in again: all of them.
        const later = await submitMany(c, AFTER, { big: false });
        assert.deepEqual(later.map(show), [], `refused after space was freed (${accepted.size - filled} accepted since)`);
        assert.equal((await ready.get('/readyz')).status, 200);

        // Every 202 is there.
        const missing = [];
        await mapLimit([...accepted.keys()], 16, async (id) => {
            const res = await c.get(`/v1/jobs/${id}`);
            if (res.status !== 200 || res.json.payload?.nonce !== accepted.get(id)) missing.push(show(res));
        });
        assert.deepEqual(missing.slice(0, 5), [], `${missing.length} of ${accepted.size} accepted jobs are missing or changed`);

        const exit = await d.stop();
        assert.equal(exit.code, 0, `the daemon did not stop cleanly: ${JSON.stringify(exit)}`);
        assert.doesNotMatch(d.stderr, /AddressSanitizer|LeakSanitizer|runtime error:/, 'a sanitizer reported something');
    });
});
