// Schedules (CONTRACT.md section 12): /v1/schedules. every and 6-field cron fire on time, upcoming across DST
// changes, each overlap policy, pause/resume/trigger, validation with pointers, 409 on a taken id, tenants, ETag,
// paging, and kill -9 during a burst of fire times: after the restart no fire time ran twice and the missed ones
// within the window ran. Fire times are checked by what the jobs say ("schedule": {"id", "fireTime"}), with
// generous bounds on when, never tight ones.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, lease, leaseOne, show, sleep } from './lib/jobs.mjs';

const MERGE = { 'content-type': 'application/merge-patch+json' };
const JOB = { type: 'report.export', payload: { n: 1 } };

async function create(c, body) {
    return expectStatus(await c.post('/v1/schedules', body), 201).json;
}

async function getSchedule(c, id) {
    return expectStatus(await c.get(`/v1/schedules/${id}`), 200).json;
}

/** Poll the schedule until pred(schedule) holds; fail after ms. */
async function until(c, id, pred, ms = 20_000, what = 'the schedule to get there') {
    const end = Date.now() + ms;
    let s;
    for (;;) {
        s = await getSchedule(c, id);
        if (pred(s)) return s;
        if (Date.now() > end) assert.fail(`timed out waiting for ${what}: ${JSON.stringify(s)}`);
        await sleep(200);
    }
}

/** Every job of the tenant made by schedule id, oldest fire time first. */
async function scheduleJobs(c, id) {
    const jobs = [];
    let token = null;
    do {
        const res = expectStatus(await c.get(`/v1/jobs?limit=200${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`), 200);
        jobs.push(...res.json.items);
        token = res.json.nextPageToken;
    } while (token);
    return jobs.filter((j) => j.schedule?.id === id).sort((a, b) => Date.parse(a.schedule.fireTime) - Date.parse(b.schedule.fireTime));
}

describe('schedules', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('every fires on its interval: each job carries its fire time, made soon after it', async () => {
        const { c } = tenant(d);
        const s = await create(c, { id: 'each-second', every: '1s', overlap: 'allow', job: JOB });
        assert.equal(s.id, 'each-second');
        assert.equal(s.every, '1s');
        assert.equal(s.cron, null);
        assert.equal(s.timezone, 'UTC');
        assert.equal(s.overlap, 'allow');
        assert.equal(s.catchupWindow, '1m');
        assert.equal(s.upcoming.length, 5);
        assert.equal(s.nextRunAt, s.upcoming[0]);
        for (let i = 1; i < 5; i++) assert.equal(Date.parse(s.upcoming[i]) - Date.parse(s.upcoming[i - 1]), 1000);
        const got = await until(c, s.id, (x) => x.recentRuns.length >= 3, 20_000, 'three runs');
        const jobs = await scheduleJobs(c, s.id);
        assert.ok(jobs.length >= 3, `jobs: ${jobs.length}`);
        const fires = jobs.map((j) => Date.parse(j.schedule.fireTime));
        assert.equal(new Set(fires).size, fires.length, 'a fire time ran twice');
        for (let i = 1; i < fires.length; i++) assert.equal(fires[i] - fires[i - 1], 1000, `fire times ${fires}`);
        for (const j of jobs) {
            const late = Date.parse(j.createdAt) - Date.parse(j.schedule.fireTime);
            assert.ok(late >= 0 && late < 15_000, `job made ${late} ms after its fire time`);
            assert.deepEqual(j.payload, JOB.payload);
            assert.equal(j.type, JOB.type);
        }
        // recentRuns: newest first, naming the jobs.
        const runs = got.recentRuns;
        for (let i = 1; i < runs.length; i++) assert.ok(Date.parse(runs[i - 1].fireTime) > Date.parse(runs[i].fireTime));
        assert.ok(jobs.some((j) => j.id === runs[0].jobId));
        assert.ok(got.counts.fires >= 3);
        const m = expectStatus(await api(d, 'adm').get('/metrics'), 200).text;
        assert.match(m, /^acceptd_schedule_fires_total [1-9]\d*$/m);
        assert.match(m, /^# TYPE acceptd_schedule_skips_total counter$/m);
    });

    it('a 6-field cron fires at its seconds', async () => {
        const { c } = tenant(d);
        const s = await create(c, { cron: '*/2 * * * * *', overlap: 'allow', job: JOB });
        assert.match(s.id, /^sch_/);
        for (const t of s.upcoming) assert.equal(new Date(t).getUTCSeconds() % 2, 0, s.upcoming.join());
        await until(c, s.id, (x) => x.recentRuns.length >= 2, 20_000, 'two runs');
        const jobs = await scheduleJobs(c, s.id);
        for (const j of jobs) {
            assert.equal(new Date(j.schedule.fireTime).getUTCSeconds() % 2, 0, j.schedule.fireTime);
            assert.equal(new Date(j.schedule.fireTime).getUTCMilliseconds(), 0);
        }
    });

    it('upcoming follows the time zone across DST changes (Europe/Berlin, America/New_York)', async () => {
        const { c } = tenant(d);
        const berlin = await create(c, { cron: '0 9 * * *', timezone: 'Europe/Berlin', startAt: '2027-03-26T00:00:00Z', job: JOB });
        assert.deepEqual(berlin.upcoming, ['2027-03-26T08:00:00.000Z', '2027-03-27T08:00:00.000Z', '2027-03-28T07:00:00.000Z',
            '2027-03-29T07:00:00.000Z', '2027-03-30T07:00:00.000Z']);
        assert.equal(berlin.nextRunAt, '2027-03-26T08:00:00.000Z');
        const autumn = await create(c, { cron: '0 9 * * *', timezone: 'Europe/Berlin', startAt: '2027-10-30T00:00:00Z', job: JOB });
        assert.deepEqual(autumn.upcoming.slice(0, 3), ['2027-10-30T07:00:00.000Z', '2027-10-31T08:00:00.000Z', '2027-11-01T08:00:00.000Z']);
        const ny = await create(c, { cron: '30 9 * * *', timezone: 'America/New_York', startAt: '2027-03-12T00:00:00Z', job: JOB });
        assert.deepEqual(ny.upcoming, ['2027-03-12T14:30:00.000Z', '2027-03-13T14:30:00.000Z', '2027-03-14T13:30:00.000Z',
            '2027-03-15T13:30:00.000Z', '2027-03-16T13:30:00.000Z']);
        // 02:30 does not exist in Berlin on 28 March 2027 (02:00 -> 03:00): it runs once, an hour on (docs/schedules.md).
        const gap = await create(c, { cron: '30 2 * * *', timezone: 'Europe/Berlin', startAt: '2027-03-27T00:00:00Z', job: JOB });
        assert.deepEqual(gap.upcoming.slice(0, 3), ['2027-03-27T01:30:00.000Z', '2027-03-28T01:30:00.000Z', '2027-03-29T00:30:00.000Z']);
        // 02:30 happens twice on 31 October 2027 (03:00 -> 02:00): it runs once, at the first (summer time).
        const overlap = await create(c, { cron: '30 2 * * *', timezone: 'Europe/Berlin', startAt: '2027-10-30T00:00:00Z', job: JOB });
        assert.deepEqual(overlap.upcoming.slice(0, 3), ['2027-10-30T00:30:00.000Z', '2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z']);
        // endAt bounds them; after it there are none.
        const ended = await create(c, { every: '1h', startAt: '2020-01-01T00:00:00Z', endAt: '2020-01-02T00:00:00Z', job: JOB });
        assert.deepEqual(ended.upcoming, []);
        assert.equal(ended.nextRunAt, null);
    });

    it('overlap skip: no job while the last one is queued, and the skips are counted', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', job: JOB });
        assert.equal(s.overlap, 'skip');
        await until(c, s.id, (x) => x.recentRuns.length === 1 && x.counts.skips >= 2, 20_000, 'one run and two skips');
        const got = await getSchedule(c, s.id);
        assert.equal(got.recentRuns.length, 1);
        assert.equal((await scheduleJobs(c, s.id)).length, 1);
    });

    it('overlap allow: a job at every fire time, however many are queued', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'allow', job: JOB });
        await until(c, s.id, (x) => x.recentRuns.length >= 3, 20_000, 'three runs');
        const jobs = await scheduleJobs(c, s.id);
        assert.ok(jobs.filter((j) => j.status === 'queued').length >= 3);
    });

    it('overlap bufferOne: one run waits behind the running one, the others are skipped; it starts when that one ends', async () => {
        const { c, w } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'bufferOne', job: { type: 'image.resize', payload: {} } });
        await until(c, s.id, (x) => x.recentRuns.length === 1, 20_000, 'the first run');
        const first = await leaseOne(w, ['image.resize']);
        await until(c, s.id, (x) => x.recentRuns.length === 2, 20_000, 'the buffered run');
        const skips = (await getSchedule(c, s.id)).counts.skips;
        await until(c, s.id, (x) => x.counts.skips >= skips + 2, 20_000, 'two more skips');
        const got = await getSchedule(c, s.id);
        assert.equal(got.recentRuns.length, 2, JSON.stringify(got));
        const jobs = await scheduleJobs(c, s.id);
        assert.deepEqual(jobs.map((j) => j.status), ['running', 'queued']);
        // The buffered run is held while the first runs: no worker may take it.
        assert.equal((await lease(w, ['image.resize'], { wait: 1 })).status, 204);
        assert.equal((await complete(w, first.job.id, first.leaseId)).status, 'succeeded');
        const next = await leaseOne(w, ['image.resize'], { wait: 5 });
        assert.equal(next.job.id, got.recentRuns[0].jobId);
        // Now it runs, the next fire time buffers one more behind it.
        await until(c, s.id, (x) => x.recentRuns.length === 3, 20_000, 'the next buffered run');
    });

    it('overlap cancelOther: each fire cancels the previous job and makes a new one', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'cancelOther', job: JOB });
        await until(c, s.id, (x) => x.recentRuns.length >= 3, 20_000, 'three runs');
        const jobs = await scheduleJobs(c, s.id);
        const live = jobs.filter((j) => j.status === 'queued');
        assert.ok(live.length <= 1, JSON.stringify(jobs.map((j) => j.status)));
        assert.ok(jobs.filter((j) => j.status === 'cancelled').length >= 2);
    });

    it('pause skips fire times without catching up; trigger runs now; resume fires again', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'allow', paused: true, job: JOB });
        assert.equal(s.paused, true);
        assert.equal(s.nextRunAt, null);
        assert.deepEqual(s.upcoming, []);
        const t0 = Date.now();
        const trig = expectStatus(await c.post(`/v1/schedules/${s.id}:trigger`), 200).json;
        assert.equal(trig.recentRuns.length, 1);
        const fire = Date.parse(trig.recentRuns[0].fireTime);
        assert.ok(fire >= t0 - 1000 && fire <= Date.now() + 1000, `trigger's fire time ${trig.recentRuns[0].fireTime}`);
        await sleep(2500);
        assert.equal((await getSchedule(c, s.id)).recentRuns.length, 1, 'a paused schedule fired');
        const resumed = expectStatus(await c.req('PATCH', `/v1/schedules/${s.id}`, { body: { paused: false }, headers: MERGE }), 200).json;
        assert.equal(resumed.paused, false);
        assert.ok(Date.parse(resumed.nextRunAt) >= Date.now() - 1000, `resumed with an old fire time: ${resumed.nextRunAt}`);
        await until(c, s.id, (x) => x.recentRuns.length >= 3, 20_000, 'runs after the resume');
        const jobs = await scheduleJobs(c, s.id);
        // Nothing ran for the paused seconds: every scheduled fire time is after the resume.
        const resumedAt = Date.parse(resumed.updatedAt);
        for (const j of jobs.slice(1)) assert.ok(Date.parse(j.schedule.fireTime) > resumedAt - 1000, j.schedule.fireTime);
        // Pause again: nextRunAt null.
        const paused = expectStatus(await c.req('PATCH', `/v1/schedules/${s.id}`, { body: { paused: true }, headers: MERGE }), 200).json;
        assert.equal(paused.nextRunAt, null);
    });

    it('trigger under skip while the last job is queued runs nothing and counts a skip', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1h', job: JOB });
        let t = expectStatus(await c.post(`/v1/schedules/${s.id}:trigger`), 200).json;
        assert.equal(t.recentRuns.length, 1);
        t = expectStatus(await c.post(`/v1/schedules/${s.id}:trigger`), 200).json;
        assert.equal(t.recentRuns.length, 1);
        assert.equal(t.counts.skips, 1);
    });

    it('422 with JSON Pointers for a bad cron, every, timezone, duration or job; 409 on a taken id', async () => {
        const { c } = tenant(d);
        const bad = async (body, pointers) => {
            const res = await c.post('/v1/schedules', body);
            assertProblem(res, 422, 'validation-failed');
            const got = res.json.errors.map((e) => e.pointer).sort();
            assert.deepEqual(got, [...pointers].sort(), show(res));
        };
        await bad({ cron: '61 * * * *', job: JOB }, ['/cron']);
        await bad({ cron: '0 0 L * *', job: JOB }, ['/cron']);
        await bad({ every: 'often', job: JOB }, ['/every']);
        await bad({ every: '10ms', job: JOB }, ['/every']);
        await bad({ job: JOB }, ['']);
        await bad({ cron: '* * * * *', every: '1m', job: JOB }, ['/every']);
        await bad({ every: '1m', timezone: 'Mars/Olympus_Mons', job: JOB }, ['/timezone']);
        await bad({ every: '1m', timezone: '../../etc/passwd', job: JOB }, ['/timezone']);
        await bad({ every: '1m', catchupWindow: 'a while', overlap: 'sometimes', job: JOB }, ['/catchupWindow', '/overlap']);
        await bad({ every: '1m', startAt: 'tomorrow', job: JOB }, ['/startAt']);
        await bad({ every: '1m' }, ['/job']);
        await bad({ every: '1m', job: { payload: {} } }, ['/job/type']);
        await bad({ every: '1m', job: { type: 'report.export', priority: 'urgent', maxAttempts: 0 } }, ['/job/priority', '/job/maxAttempts']);
        await bad({ every: '1m', job: { type: 'video.transcode', payload: {} } }, ['/job/payload/sourceUrl']);
        await bad({ every: '1m', job: { type: 'no.such.type' } }, ['/job/type']);
        await bad({ every: '1m', job: { type: 'report.export', runAt: '2030-01-01T00:00:00Z' } }, ['/job/runAt']);
        await bad({ id: 'has space', every: '1m', job: JOB }, ['/id']);
        await create(c, { id: 'taken', every: '1m', job: JOB });
        assertProblem(await c.post('/v1/schedules', { id: 'taken', every: '5m', job: JOB }), 409, 'already-exists');
        // A patch is checked the same way; nothing of it applies.
        const res = await c.req('PATCH', '/v1/schedules/taken', { body: { every: 'never', job: { priority: 'urgent' } }, headers: MERGE });
        assertProblem(res, 422, 'validation-failed');
        assert.deepEqual(res.json.errors.map((e) => e.pointer).sort(), ['/every', '/job/priority']);
        assert.equal((await getSchedule(c, 'taken')).every, '1m');
        assertProblem(await c.req('PATCH', '/v1/schedules/taken', { body: { every: '2m' } }), 415, 'unsupported-media-type');
    });

    it('GET with ETag and 304, PATCH merges into the definition and the job, DELETE, paging by id', async () => {
        const { c } = tenant(d);
        const created = await c.post('/v1/schedules', { id: 'p1', every: '1h', job: JOB });
        expectStatus(created, 201);
        assert.equal(created.headers.get('location'), '/v1/schedules/p1');
        const res = expectStatus(await c.get('/v1/schedules/p1'), 200);
        const etag = res.headers.get('etag');
        assert.ok(etag);
        expectStatus(await c.get('/v1/schedules/p1', { headers: { 'if-none-match': etag } }), 304);
        const patched = expectStatus(await c.req('PATCH', '/v1/schedules/p1', { body: { every: '2h', job: { payload: { n: 2 } } }, headers: MERGE }), 200);
        assert.notEqual(patched.headers.get('etag'), etag);
        assert.equal(patched.json.every, '2h');
        assert.deepEqual(patched.json.job, { type: 'report.export', payload: { n: 2 } });
        expectStatus(await c.get('/v1/schedules/p1', { headers: { 'if-none-match': etag } }), 200);
        await create(c, { id: 'p2', every: '1h', job: JOB });
        await create(c, { id: 'p3', every: '1h', job: JOB });
        const page1 = expectStatus(await c.get('/v1/schedules?limit=2'), 200).json;
        assert.deepEqual(page1.items.map((s) => s.id), ['p1', 'p2']);
        assert.ok(page1.nextPageToken);
        const page2 = expectStatus(await c.get(`/v1/schedules?limit=2&pageToken=${encodeURIComponent(page1.nextPageToken)}`), 200).json;
        assert.deepEqual(page2.items.map((s) => s.id), ['p3']);
        assert.equal(page2.nextPageToken, null);
        assertProblem(await c.get('/v1/schedules?pageToken=AAAA'), 400, 'invalid-request');
        expectStatus(await c.del('/v1/schedules/p2'), 204);
        assertProblem(await c.get('/v1/schedules/p2'), 404, 'not-found');
        assertProblem(await c.del('/v1/schedules/p2'), 404, 'not-found');
    });

    it("another tenant's schedule is not found, not listed, not triggered, not deleted", async () => {
        const x = tenant(d);
        const y = tenant(d);
        await create(x.c, { id: 'mine', every: '1h', job: JOB });
        assertProblem(await y.c.get('/v1/schedules/mine'), 404, 'not-found');
        assertProblem(await y.c.post('/v1/schedules/mine:trigger'), 404, 'not-found');
        assertProblem(await y.c.req('PATCH', '/v1/schedules/mine', { body: { paused: true }, headers: MERGE }), 404, 'not-found');
        assertProblem(await y.c.del('/v1/schedules/mine'), 404, 'not-found');
        assert.deepEqual(expectStatus(await y.c.get('/v1/schedules'), 200).json.items, []);
        // The same id is free for the other tenant.
        await create(y.c, { id: 'mine', every: '2h', job: JOB });
        assert.equal((await getSchedule(x.c, 'mine')).every, '1h');
        assert.equal((await getSchedule(x.c, 'mine')).paused, false);
    });
});

describe('schedules across kill -9', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('no fire time runs twice, and the ones missed while down run once each within the window', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'allow', catchupWindow: '1m', job: JOB });
        await until(c, s.id, (x) => x.recentRuns.length >= 3, 20_000, 'three runs');
        // Kill in the middle of the burst of fire times, stay down a few of them, come back.
        await d.kill9();
        const downAt = Date.now();
        await sleep(3000);
        await d.restart();
        const upAt = Date.now();
        const got = await until(c, s.id, (x) => Date.parse(x.recentRuns[0].fireTime) > upAt + 1000, 20_000, 'runs after the restart');
        assert.ok(got.counts.catchups >= 2, `catch-ups: ${JSON.stringify(got.counts)}`);
        const jobs = await scheduleJobs(c, s.id);
        const fires = jobs.map((j) => Date.parse(j.schedule.fireTime));
        assert.equal(new Set(fires).size, fires.length, 'a fire time ran twice');
        // Every second from the first fire time to the last ran: none lost across the kill.
        for (let i = 1; i < fires.length; i++) assert.equal(fires[i] - fires[i - 1], 1000, `a fire time is missing near ${new Date(fires[i]).toISOString()}`);
        assert.ok(fires.some((f) => f > downAt && f < upAt), 'no fire time of the down period ran');
        assert.equal(got.counts.fires, jobs.length);
    });

    it('fire times missed past the catch-up window are skipped and counted, not run', async () => {
        const { c } = tenant(d);
        const s = await create(c, { every: '1s', overlap: 'allow', catchupWindow: '1s', job: JOB });
        await until(c, s.id, (x) => x.recentRuns.length >= 1, 20_000, 'a run');
        await d.kill9();
        const downAt = Date.now();
        await sleep(7000);
        await d.restart();
        const upAt = Date.now();
        const got = await until(c, s.id, (x) => Date.parse(x.recentRuns[0].fireTime) > upAt + 1000, 20_000, 'runs after the restart');
        assert.ok(got.counts.skips >= 2, `skips: ${JSON.stringify(got.counts)}`);
        const jobs = await scheduleJobs(c, s.id);
        const fires = jobs.map((j) => Date.parse(j.schedule.fireTime));
        assert.equal(new Set(fires).size, fires.length, 'a fire time ran twice');
        // Seconds of the down time more than the window (1 s) before the restart, with a margin for the start-up.
        const old = fires.filter((f) => f > downAt + 1500 && f < upAt - 4000);
        assert.deepEqual(old.map((f) => new Date(f).toISOString()), [], 'fire times older than the window ran');
    });
});
