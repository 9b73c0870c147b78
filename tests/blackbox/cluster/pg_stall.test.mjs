// A stalled PostgreSQL store must not stall the node (issue 37). A second session holds an ACCESS EXCLUSIVE lock
// on the jobs table in an open transaction, so every read of jobs waits. Meanwhile a list and a change-feed
// request are sent: on the event loop they would hold every connection of the node until the lock goes. With the
// reads off the loop, polls of a cached job keep answering (304 to If-None-Match, 200 without) while the list and
// the change feed are still waiting, and those answer, with the right content, once the lock is released. How
// fast the polls answer is a benchmark's business (no timed assertion here: a loaded CI host is slow, not wrong).
// It needs a PostgreSQL store (only `make blackbox-pg` runs this folder): reading a local SQLite file in WAL mode
// never waits for another session's lock.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { it, startDaemon, standardConfig, tenant } from '../lib/daemon.mjs';
import { expectStatus, submit } from '../lib/jobs.mjs';

const POLLS = 20;
const POLL_GIVE_UP_MS = 3000; // a poll stuck behind the loop is given up on, so the lock can be released

/** Open a psql session on url that locks the jobs table and keeps its transaction open until release(). */
async function lockJobs(url) {
    const psql = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-At', url], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    psql.stdout.on('data', (b) => (out += b));
    psql.stderr.on('data', (b) => (err += b));
    const exited = new Promise((resolve) => psql.on('exit', resolve));
    psql.stdin.write("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n");
    const t0 = Date.now();
    while (!out.includes('locked')) {
        if (psql.exitCode !== null || Date.now() - t0 > 10_000) throw new Error(`psql could not lock jobs: ${err}`);
        await new Promise((r) => setTimeout(r, 10));
    }
    return {
        async release() {
            if (psql.exitCode === null) {
                psql.stdin.end('ROLLBACK;\n');
                const t = setTimeout(() => psql.kill('SIGKILL'), 5000);
                await exited;
                clearTimeout(t);
            }
        },
    };
}

describe('a stalled PostgreSQL store (issue 37)', () => {
    const daemons = [];
    after(async () => {
        for (const d of daemons) await d.stop();
    });

    it('cached polls answer while jobs is locked and a list and the change feed wait; those answer once it is released', { timeout: 60_000 }, async () => {
        const d = await startDaemon({ config: standardConfig() });
        daemons.push(d);
        const { c } = tenant(d);
        const ids = [];
        for (let i = 0; i < 3; i++) ids.push(expectStatus(await submit(c, { type: 'report.export', payload: { i } }), 202).json.id);
        const first = expectStatus(await c.get(`/v1/jobs/${ids[0]}`), 200);
        const etag = first.headers.get('etag');
        assert.ok(etag, 'the job has an ETag');
        const before = expectStatus(await c.get('/v1/jobs/changes'), 200).json;

        const lock = await lockJobs(d.store);
        const polls = [];
        let list;
        let feed;
        let listDone = false;
        let feedDone = false;
        let waitingAfterPolls;
        try {
            // Sent first: on the loop, either read would hold every request behind it until the lock goes.
            list = c.get('/v1/jobs?limit=10', { timeoutMs: 30_000 }).finally(() => (listDone = true));
            feed = c.get('/v1/jobs/changes?since=0', { timeoutMs: 30_000 }).finally(() => (feedDone = true));
            await new Promise((r) => setTimeout(r, 100)); // both reads are waiting on the lock now
            for (let i = 0; i < POLLS; i++) {
                const id = ids[i % ids.length];
                const conditional = id === ids[0] && i % 2 === 0;
                let res;
                try {
                    res = await c.get(`/v1/jobs/${id}`, { headers: conditional ? { 'if-none-match': etag } : {}, timeoutMs: POLL_GIVE_UP_MS });
                } catch (e) {
                    res = { status: 0, text: String(e.message) };
                }
                polls.push({ i, status: res.status, expect: conditional ? 304 : 200, text: res.text });
                if (res.status === 0) break; // the loop is stuck: no use waiting out the rest
            }
            waitingAfterPolls = { list: !listDone, feed: !feedDone };
        } finally {
            await lock.release();
        }
        const bad = polls.filter((p) => p.status !== p.expect);
        assert.deepEqual(bad, [], `every poll during the stall answers (${polls.length} sent)`);
        assert.equal(polls.length, POLLS);
        // The polls were answered while the reads that need the store were still held by the lock.
        assert.deepEqual(waitingAfterPolls, { list: true, feed: true });

        const l = expectStatus(await list, 200);
        assert.deepEqual(l.json.items.map((j) => j.id), [...ids].reverse(), l.text);
        const f = expectStatus(await feed, 200);
        assert.deepEqual(f.json.changes.map((j) => j.id), before.changes.map((j) => j.id), f.text);
        assert.deepEqual(f.json.changes.map((j) => j.id).sort(), [...ids].sort(), f.text);
    });
});
