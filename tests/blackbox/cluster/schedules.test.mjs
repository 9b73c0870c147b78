// Schedules on two nodes sharing one PostgreSQL database (CONTRACT.md section 12): every fire time of a 1-second
// schedule makes exactly one job across 60 s, whichever node takes it, and when one node dies the other goes on
// firing (each node looks at the due schedules itself). Runs only under `make blackbox-pg` (ACCEPTD_TEST_PG).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api } from '../lib/daemon.mjs';
import { expectStatus, sleep } from '../lib/jobs.mjs';
import { startPair } from '../lib/queues.mjs';

async function scheduleJobs(c, id) {
    const jobs = [];
    let token = null;
    do {
        const res = expectStatus(await c.get(`/v1/jobs?limit=200${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`), 200);
        jobs.push(...res.json.items);
        token = res.json.nextPageToken;
    } while (token);
    return jobs.filter((j) => j.schedule?.id === id);
}

describe('schedules on two nodes of one database', () => {
    let a;
    let b;
    before(async () => {
        [a, b] = await startPair();
    });
    after(async () => {
        await a?.stop();
        await b?.stop();
    });

    it('every fire time of a 1-second schedule runs exactly once over 60 s, through the loss of a node', async () => {
        const ca = api(a, 'kc');
        const cb = api(b, 'kc');
        const s = expectStatus(await ca.post('/v1/schedules', { id: 'tick', every: '1s', overlap: 'allow', job: { type: 'cl.job', payload: {} } }), 201).json;
        const first = Date.parse(s.nextRunAt);
        // The other node reads it from the shared store.
        assert.equal(expectStatus(await cb.get('/v1/schedules/tick'), 200).json.every, '1s');
        await sleep(30_000);
        await a.kill9();
        const killedAt = Date.now();
        await sleep(30_000);
        const last = Date.now() - 3000; // fire times up to here have surely run
        const jobs = await scheduleJobs(cb, 'tick');
        const fires = jobs.map((j) => Date.parse(j.schedule.fireTime)).sort((x, y) => x - y);
        const dup = fires.filter((f, i) => i > 0 && f === fires[i - 1]);
        assert.deepEqual(dup.map((f) => new Date(f).toISOString()), [], 'fire times that ran twice');
        const want = [];
        for (let t = first; t <= last; t += 1000) want.push(t);
        const got = new Set(fires);
        const missing = want.filter((t) => !got.has(t));
        assert.deepEqual(missing.map((t) => new Date(t).toISOString()), [], 'fire times that never ran');
        assert.ok(want.length >= 55, `only ${want.length} fire times in the run`);
        assert.ok(fires.some((f) => f > killedAt + 2000), 'the surviving node did not go on firing');
        const got2 = expectStatus(await cb.get('/v1/schedules/tick'), 200).json;
        assert.equal(got2.counts.fires, jobs.length);
    });
});
