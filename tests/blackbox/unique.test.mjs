// Unique jobs and debounce (CONTRACT §11): a submit with a uniqueKey while a job of the same tenant, type and key
// is queued or running answers that job ("deduplicated": true) and stores nothing; debounceSeconds moves a queued
// one's runAt and replaces its payload (the last submit wins). On SQLite and, under `make blackbox-pg`, PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, getJob, hget, lease, leaseOne, listAll, show, submit } from './lib/jobs.mjs';

const batch = async (c, jobs) => expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
const ms = (t) => Date.parse(t);

describe('unique jobs', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a second submit of a live key answers the same job, deduplicated, and stores nothing', async () => {
        const { c } = tenant(d);
        const first = await submit(c, { type: 'report.export', payload: { n: 1 }, uniqueKey: 'report-7' });
        assert.equal(first.json.uniqueKey, 'report-7', show(first));
        assert.equal(first.json.deduplicated, undefined, `the first submit is not a duplicate: ${show(first)}`);
        const again = await submit(c, { type: 'report.export', payload: { n: 2 }, uniqueKey: 'report-7' });
        assert.equal(again.json.id, first.json.id, show(again));
        assert.equal(again.json.deduplicated, true, show(again));
        assert.equal(hget(again, 'location'), hget(first, 'location'));
        assert.deepEqual(again.json.payload, { n: 1 }, 'without debounceSeconds the payload stays');
        // The stored representation shows the key but is not itself "deduplicated".
        const stored = await getJob(c, first.json.id);
        assert.equal(stored.uniqueKey, 'report-7');
        assert.equal(stored.deduplicated, undefined);
        // Prefer: return=minimal keeps the flag.
        const minimal = await submit(c, { type: 'report.export', uniqueKey: 'report-7' }, { headers: { prefer: 'return=minimal' } });
        assert.deepEqual(minimal.json, { id: first.json.id, deduplicated: true });
        // Another type, another key, or no key: new jobs.
        const otherType = await submit(c, { type: 'email.send', uniqueKey: 'report-7' });
        const otherKey = await submit(c, { type: 'report.export', uniqueKey: 'report-8' });
        const noKey = await submit(c, { type: 'report.export' });
        const ids = new Set([first.json.id, otherType.json.id, otherKey.json.id, noKey.json.id]);
        assert.equal(ids.size, 4, 'type and key scope the uniqueness');
        assert.equal(noKey.json.uniqueKey, undefined, 'a job without a key shows none');
        assert.equal((await listAll(c)).length, 4);
        // Another tenant's job of the same key is not this tenant's.
        const { c: c2 } = tenant(d);
        const theirs = await submit(c2, { type: 'report.export', uniqueKey: 'report-7' });
        assert.notEqual(theirs.json.id, first.json.id);
        assert.equal(theirs.json.deduplicated, undefined);
    });

    it('a running job is answered too; once it has ended the key is free', async () => {
        const { c, w } = tenant(d);
        const first = await submit(c, { type: 'image.resize', payload: { v: 1 }, uniqueKey: 'img-1' });
        const l = await leaseOne(w, 'image.resize', { expectId: first.json.id });
        const whileRunning = await submit(c, { type: 'image.resize', payload: { v: 2 }, uniqueKey: 'img-1', debounceSeconds: 30 });
        assert.equal(whileRunning.json.id, first.json.id);
        assert.equal(whileRunning.json.deduplicated, true);
        assert.equal(whileRunning.json.status, 'running');
        assert.deepEqual(whileRunning.json.payload, { v: 1 }, 'a running job is answered unchanged, debounce or not');
        assert.equal(whileRunning.json.runAt, null, 'a running job keeps its runAt');
        assert.equal(whileRunning.json.lastUpdatedAt, l.job.lastUpdatedAt, 'a running job is not changed');
        await complete(w, first.json.id, l.leaseId);
        const after = await submit(c, { type: 'image.resize', payload: { v: 3 }, uniqueKey: 'img-1' });
        assert.notEqual(after.json.id, first.json.id, 'the key of a finished job is free');
        assert.equal(after.json.deduplicated, undefined);
        // A cancelled job frees its key as well.
        expectStatus(await c.del(`/v1/jobs/${after.json.id}`), 200);
        const third = await submit(c, { type: 'image.resize', uniqueKey: 'img-1' });
        assert.notEqual(third.json.id, after.json.id);
        assert.equal((await listAll(c)).length, 3);
    });

    it('twelve concurrent submits of one key make exactly one job, and all twelve answers name it', async () => {
        const { c } = tenant(d);
        const answers = await Promise.all(
            Array.from({ length: 12 }, (_, i) => submit(c, { type: 'report.export', payload: { i }, uniqueKey: 'burst' })),
        );
        const ids = new Set(answers.map((a) => a.json.id));
        assert.equal(ids.size, 1, `several jobs: ${[...ids]}`);
        assert.equal(answers.filter((a) => a.json.deduplicated === true).length, 11, 'one answer made the job, eleven found it');
        assert.equal((await listAll(c)).length, 1);
    });

    it('debounce: each submit replaces the payload and moves runAt to now + n; the last one wins', async () => {
        const { c, w } = tenant(d);
        const t0 = Date.now();
        const first = await submit(c, { type: 'email.send', payload: { text: 'h' }, uniqueKey: 'typing', debounceSeconds: 60 });
        assert.ok(ms(first.json.runAt) >= t0 + 59_000, `runAt of the first submit is now + 60 s: ${show(first)}`);
        const cursor = expectStatus(await c.get('/v1/jobs/changes?since=0'), 200).json.cursor;
        const second = await submit(c, { type: 'email.send', payload: { text: 'he' }, uniqueKey: 'typing', debounceSeconds: 600 });
        assert.equal(second.json.id, first.json.id);
        assert.equal(second.json.deduplicated, true);
        assert.deepEqual(second.json.payload, { text: 'he' });
        assert.ok(ms(second.json.runAt) >= t0 + 599_000, `runAt moved to now + 600 s: ${show(second)}`);
        assert.notEqual(hget(second, 'etag'), hget(first, 'etag'), 'the change has a new ETag');
        const stored = await getJob(c, first.json.id);
        assert.deepEqual(stored.payload, { text: 'he' });
        assert.equal(stored.runAt, second.json.runAt);
        // The move is a change of the job: the change feed has it past the cursor taken before it.
        const changes = expectStatus(await c.get(`/v1/jobs/changes?since=${encodeURIComponent(cursor)}`), 200).json.changes;
        assert.deepEqual(changes.map((j) => [j.id, j.runAt, j.payload.text]), [[first.json.id, second.json.runAt, 'he']]);
        assert.equal(expectStatus(await lease(w, 'email.send', { wait: 0 }), 204).status, 204, 'not due yet');
        // The last submit brings it forward to 1 s from now: a lease parked until then gets it, with the last
        // payload (the runAt timer follows the move; the 600 s one would come too late).
        const last = await submit(c, { type: 'email.send', payload: { text: 'hello' }, uniqueKey: 'typing', debounceSeconds: 1 });
        assert.equal(last.json.id, first.json.id);
        assert.ok(ms(last.json.runAt) < ms(second.json.runAt), show(last));
        const got = await leaseOne(w, 'email.send', { wait: 5, expectId: first.json.id });
        assert.deepEqual(got.job.payload, { text: 'hello' });
        assert.equal((await listAll(c)).length, 1);
    });

    it('a batch: two jobs of one key make one job; a job of a live key answers it', async () => {
        const { c } = tenant(d);
        const live = await submit(c, { type: 'report.export', payload: { a: 0 }, uniqueKey: 'live' });
        const t0 = Date.now();
        const items = (
            await batch(c, [
                { type: 'report.export', payload: { a: 1 }, uniqueKey: 'b-1' },
                { type: 'report.export', payload: { a: 2 }, uniqueKey: 'b-1' },
                { type: 'report.export', payload: { a: 3 }, uniqueKey: 'live' },
                { type: 'report.export', payload: { a: 4 }, uniqueKey: 'b-2', debounceSeconds: 100 },
                { type: 'report.export', payload: { a: 5 }, uniqueKey: 'b-2', debounceSeconds: 200 },
            ])
        ).json.results;
        for (const item of items) assert.equal(item.status, 202, JSON.stringify(item));
        assert.equal(items[1].id, items[0].id, 'two jobs of one key in one batch made two jobs');
        assert.equal(items[0].deduplicated, undefined);
        assert.equal(items[1].deduplicated, true);
        assert.equal(items[2].id, live.json.id);
        assert.equal(items[2].deduplicated, true);
        assert.equal(items[4].id, items[3].id);
        // Both items show the job as the batch left it: the later item's payload and runAt.
        assert.deepEqual(items[3].job, items[4].job);
        assert.deepEqual(items[4].job.payload, { a: 5 }, 'the later item of the batch wins');
        assert.ok(ms(items[4].job.runAt) >= t0 + 199_000, JSON.stringify(items[4]));
        assert.equal((await listAll(c)).length, 3);
        assert.deepEqual((await getJob(c, items[3].id)).payload, { a: 5 });
    });

    it('the Idempotency-Key is checked first; a deduplicated submit records its key for the job it answered', async () => {
        const { c } = tenant(d);
        const post = (body, key) => c.req('POST', '/v1/jobs', { body, headers: { 'idempotency-key': key } });
        const first = expectStatus(await post({ type: 'report.export', payload: { x: 1 }, uniqueKey: 'u' }, 'k1'), 202);
        const dup = expectStatus(await post({ type: 'report.export', payload: { x: 2 }, uniqueKey: 'u' }, 'k2'), 202);
        assert.equal(dup.json.id, first.json.id);
        assert.equal(dup.json.deduplicated, true);
        assert.notEqual(hget(dup, 'idempotent-replayed'), 'true');
        const replay = expectStatus(await post({ type: 'report.export', payload: { x: 2 }, uniqueKey: 'u' }, 'k2'), 202);
        assert.equal(replay.json.id, first.json.id);
        assert.equal(hget(replay, 'idempotent-replayed'), 'true');
        assertProblem(await post({ type: 'report.export', payload: { x: 3 }, uniqueKey: 'u' }, 'k2'), 422, 'idempotency-key-reused');
        assert.equal((await listAll(c)).length, 1);
    });

    describe('invalid uniqueKey and debounceSeconds: 422 with a pointer, nothing stored', () => {
        const cases = [
            ['empty key', { uniqueKey: '' }, '/uniqueKey'],
            ['key of 256 characters', { uniqueKey: 'k'.repeat(256) }, '/uniqueKey'],
            ['key not a string', { uniqueKey: 7 }, '/uniqueKey'],
            ['key with a control character', { uniqueKey: 'a\nb' }, '/uniqueKey'],
            ['debounceSeconds without uniqueKey', { debounceSeconds: 5 }, '/debounceSeconds'],
            ['debounceSeconds 0', { uniqueKey: 'k', debounceSeconds: 0 }, '/debounceSeconds'],
            ['debounceSeconds not an integer', { uniqueKey: 'k', debounceSeconds: 1.5 }, '/debounceSeconds'],
            ['debounceSeconds a string', { uniqueKey: 'k', debounceSeconds: '5' }, '/debounceSeconds'],
            ['debounceSeconds over a day', { uniqueKey: 'k', debounceSeconds: 86401 }, '/debounceSeconds'],
            ['debounceSeconds with runAt', { uniqueKey: 'k', debounceSeconds: 5, runAt: '2030-01-01T00:00:00Z' }, '/debounceSeconds'],
        ];
        for (const [name, extra, pointer] of cases) {
            it(name, async () => {
                const { c } = tenant(d);
                const body = { type: 'report.export', payload: {}, ...extra };
                const p = assertProblem(await c.post('/v1/jobs', body), 422, 'validation-failed');
                assert.ok(p.errors?.some((e) => e.pointer === pointer), `no error at ${pointer}: ${JSON.stringify(p)}`);
                const item = (await batch(c, [body])).json.results[0];
                assert.equal(item.status, 422, JSON.stringify(item));
                assert.ok(item.problem.errors?.some((e) => e.pointer === pointer), JSON.stringify(item));
                assert.deepEqual(await listAll(c), [], 'a refused submit stored a job');
            });
        }
        it('a 255-character key is taken', async () => {
            const { c } = tenant(d);
            const res = await submit(c, { type: 'report.export', uniqueKey: 'é'.repeat(127) + 'k' });
            assert.equal(res.json.uniqueKey, 'é'.repeat(127) + 'k');
        });
    });
});
