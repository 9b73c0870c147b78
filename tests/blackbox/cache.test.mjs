// The job cache's byte budget (limits.cacheBytes): large jobs cannot grow the daemon's memory past it, and a
// job it evicted is served whole from the store, with the same ETag.

import fs from 'node:fs';
import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, hget, mapLimit, submit } from './lib/jobs.mjs';

const JOBS = 120;
const BLOB = 500_000; // bytes of payload per job: 60 MB in all, each job's in the cache twice (field and body)
const BUDGET = 4 << 20;
// Without the budget the entries alone take about 120 MB; with it the daemon stays near its base size (the
// SQLite page caches and the allocator's slack). ASan keeps freed memory in quarantine, so its RSS says nothing.
const RSS_LIMIT = 100 << 20;

function rssBytes(pid) {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m[1]) * 1024;
}

describe('job cache budget', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: standardConfig({ limits: `{ maxBodyBytes: ${BLOB + 1000}, maxWaitSeconds: 5, cacheBytes: ${BUDGET} }` }),
        });
    });
    after(() => d?.stop());

    it('large jobs do not grow memory past the budget; an evicted job is served whole with its ETag', async () => {
        const { c } = tenant(d);
        const blob = 'x'.repeat(BLOB);
        const submitted = await mapLimit(Array.from({ length: JOBS }, (_, i) => i), 4, async (i) => {
            const res = await submit(c, { type: 'report.export', payload: { i, blob } });
            return { id: res.json.id, etag: hget(res, 'etag') };
        });
        if (!process.env.ACCEPTD_SANITIZED) {
            const rss = rssBytes(d.proc.pid);
            assert.ok(rss < RSS_LIMIT, `RSS ${rss} bytes after ${JOBS} jobs of ${BLOB} bytes, want < ${RSS_LIMIT}`);
        }
        // The first jobs left the cache long ago: read from the store, and rendered the same.
        for (const { id, etag } of submitted.slice(0, 3)) {
            const res = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
            assert.equal(res.json.payload.blob.length, BLOB);
            assert.equal(hget(res, 'etag'), etag);
            expectStatus(await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag } }), 304);
        }
    });
});
