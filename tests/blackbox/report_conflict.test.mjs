// A final report repeated under the lease that ended the job: the same report (whatever the order of its
// members or its whitespace) is answered 200 with the job as the first left it and changes nothing; a report of
// the same kind that says something else (another result, resultLocation, problem, retryable) is 409 and the
// first one stands. A repeat with "next" leases nothing again.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, getJob, hget, leaseOne, show, sleep, submit } from './lib/jobs.mjs';

const TYPE = 'report.export';

/** The job, its ETag, its result (or null) and its attempt rows: what a report must not change. */
async function snapshot(t, id) {
    const res = expectStatus(await t.c.get(`/v1/jobs/${id}`), 200);
    const r = await t.c.get(`/v1/jobs/${id}/result`);
    const rows = expectStatus(await t.c.get(`/v1/jobs/${id}/attempts`), 200).json.attempts;
    return { job: res.json, etag: hget(res, 'etag'), result: r.status === 200 ? r.json : null, rows };
}

/** POST a report with a body given as raw text (another member order, other whitespace). */
function rawReport(w, id, op, text) {
    return w.req('POST', `/v1/jobs/${id}:${op}`, { raw: text, headers: { 'content-type': 'application/json' } });
}

describe('a final report repeated under its lease', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: `${standardConfig()}retryBackoff: 30s\n` });
    });
    after(async () => {
        if (d) assert.deepEqual(await d.stop(), { code: 0, signal: null }, `daemon exit\n${d.stderr.slice(-4000)}`);
    });

    it(':complete with another result -> 409 and the first result stands; the same result reordered -> 200, same answer', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const result = { url: 'https://cdn.example/out.mp4', sizes: [1, 2, 3], meta: { a: 1, b: 'x' } };
        const first = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result }), 200);
        assert.equal(first.json.status, 'succeeded', show(first));
        const before = await snapshot(t, id);
        assert.deepEqual(before.result, result);
        await sleep(20); // a change now would carry a later lastUpdatedAt

        // The same report, members in another order and spaced out: a repeat.
        const reordered = `{ "result" : { "meta": {"b": "x", "a": 1}, "sizes": [1, 2, 3],\n "url": "https://cdn.example/out.mp4" }, "leaseId": "${l.leaseId}" }`;
        const again = expectStatus(await rawReport(t.w, id, 'complete', reordered), 200);
        assert.deepEqual(again.json, first.json, `the repeat answered another job: ${show(again)}`);

        // Another report of the same kind: refused, and nothing of it is stored.
        for (const body of [
            { leaseId: l.leaseId, result: { ...result, url: 'https://cdn.example/other.mp4' } },
            { leaseId: l.leaseId, result: { ...result, extra: true } },
            { leaseId: l.leaseId, result: [result] },
            { leaseId: l.leaseId },
            { leaseId: l.leaseId, result, resultLocation: 'https://cdn.example/out.mp4' },
            { leaseId: l.leaseId, result, status: 'partialSuccess' },
        ]) {
            const res = await t.w.post(`/v1/jobs/${id}:complete`, body);
            const p = assertProblem(res, 409, 'stale-lease');
            assert.match(p.detail ?? '', /another report/, `${JSON.stringify(body)}: ${show(res)}`);
        }
        assert.deepEqual(await snapshot(t, id), before, 'a refused report changed the job, its result or its history');
        // And the real repeat is still answered the same after those.
        assert.deepEqual(expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result }), 200).json, first.json);
    });

    it('resultLocation counts: the same one again is a repeat, another one is 409', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const body = { leaseId: l.leaseId, resultLocation: 'https://cdn.example/a.bin', status: 'partialSuccess' };
        const first = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, body), 200);
        assert.equal(first.json.status, 'partialSuccess');
        const before = await snapshot(t, id);
        assert.deepEqual(expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, body), 200).json, first.json);
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { ...body, resultLocation: 'https://cdn.example/b.bin' }), 409, 'stale-lease');
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { ...body, resultLocation: undefined, result: {} }), 409, 'stale-lease');
        assert.deepEqual(await snapshot(t, id), before);
    });

    it('a repeat with next leases nothing again; a refused one neither', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const b = (await submit(t.c, { type: TYPE, payload: { n: 'b' } })).json.id;
        const c = (await submit(t.c, { type: TYPE, payload: { n: 'c' } })).json.id;
        const next = { types: [TYPE], max: 1, leaseSeconds: 60, worker: 'chained' };
        const first = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { n: 1 }, next }), 200);
        assert.deepEqual(first.json.leases.map((x) => x.job.id), [b], show(first));
        const again = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { n: 1 }, next }), 200);
        assert.deepEqual(again.json.job, first.json.job, show(again));
        assert.deepEqual(again.json.leases, [], `a repeated report leased again: ${show(again)}`);
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { n: 2 }, next }), 409, 'stale-lease');
        assert.equal((await getJob(t.c, c)).status, 'queued', 'a repeated or refused report leased the next job');
        assert.deepEqual(expectStatus(await t.c.get(`/v1/jobs/${c}/attempts`), 200).json.attempts, []);
        assert.deepEqual(expectStatus(await t.c.get(`/v1/jobs/${id}/result`), 200).json, { n: 1 });
    });

    it(':fail: the same problem reordered -> 200; another problem or another retryable -> 409, the first stands', async () => {
        const t = tenant(d);
        const error = { type: 'https://example.com/problems/bad-input', title: 'Bad input', status: 422, detail: 'sourceUrl answered 404', code: 'bad-input' };
        // Ended by retryable: false with attempts left: the job failed.
        const id = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 3 })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const first = expectStatus(await t.w.post(`/v1/jobs/${id}:fail`, { leaseId: l.leaseId, error, retryable: false }), 200);
        assert.equal(first.json.status, 'failed', show(first));
        const before = await snapshot(t, id);
        await sleep(20);
        const reordered = `{"retryable":false, "error": {"code":"bad-input","detail":"sourceUrl answered 404","status":422,"title":"Bad input","type":"https://example.com/problems/bad-input"}, "leaseId":"${l.leaseId}"}`;
        assert.deepEqual(expectStatus(await rawReport(t.w, id, 'fail', reordered), 200).json, first.json);
        for (const body of [
            { leaseId: l.leaseId, error: { ...error, detail: 'sourceUrl answered 500' }, retryable: false },
            { leaseId: l.leaseId, retryable: false },
            // retryable true would have queued the job again (attempts were left): not what ended it.
            { leaseId: l.leaseId, error, retryable: true },
        ]) {
            const res = await t.w.post(`/v1/jobs/${id}:fail`, body);
            assertProblem(res, 409, 'stale-lease');
        }
        assert.deepEqual(await snapshot(t, id), before, 'a refused :fail changed the job or its history');
        assert.deepEqual(before.job.error, first.json.error);

        // Ended by a retryable fail (queued again, with a long backoff): another problem is refused too.
        const id2 = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 3 })).json.id;
        const l2 = await leaseOne(t.w, TYPE, { expectId: id2 });
        const f2 = expectStatus(await t.w.post(`/v1/jobs/${id2}:fail`, { leaseId: l2.leaseId, error }), 200);
        assert.equal(f2.json.status, 'queued', show(f2));
        const before2 = await snapshot(t, id2);
        assert.deepEqual(expectStatus(await t.w.post(`/v1/jobs/${id2}:fail`, { leaseId: l2.leaseId, error: { ...error } }), 200).json, f2.json);
        assertProblem(await t.w.post(`/v1/jobs/${id2}:fail`, { leaseId: l2.leaseId, error: { ...error, code: 'other' } }), 409, 'stale-lease');
        assert.deepEqual(await snapshot(t, id2), before2);
    });
});
