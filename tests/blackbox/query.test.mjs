// A query parameter given twice is 400 invalid-request on every route, before the handler runs, as a header
// field sent twice is: `?limit=5&limit=600` must not list 5, `?wait=86400&wait=0` must not hold for a day.
// Names are compared percent-decoded, so `lim%69t` is `limit`.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, listAll, submit } from './lib/jobs.mjs';

/** Assert the 400 for a repeated name and that its detail names it. */
function assertRepeated(res, name) {
    const p = assertProblem(res, 400, 'invalid-request');
    assert.ok(p.detail.includes(`"${name}"`), `detail does not name ${name}: ${p.detail}`);
    assert.match(p.detail, /more than once/, p.detail);
}

describe('repeated query parameters', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('?limit=5&limit=600 on the job list is 400 naming limit', async () => {
        const { c } = tenant(d);
        await submit(c);
        assertRepeated(await c.get('/v1/jobs?limit=5&limit=600'), 'limit');
        assertRepeated(await c.get('/v1/jobs?limit=5&status=queued&limit=5'), 'limit'); // the same value too
        assertRepeated(await c.get('/v1/jobs?status=queued&status=running'), 'status');
        expectStatus(await c.get('/v1/jobs?limit=5&status=queued'), 200);
    });

    it('?wait=86400&wait=0 on a job is answered 400 at once, not held', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        // Test configs cap waits at 5 s; a held request would still end, as a 200.
        assertRepeated(await c.get(`/v1/jobs/${id}?wait=86400&wait=0`, { timeoutMs: 15_000 }), 'wait');
        assertRepeated(await c.get(`/v1/jobs/${id}?wait&wait=1`), 'wait'); // a name without '=' counts
        expectStatus(await c.get(`/v1/jobs/${id}?wait=0`), 200);
    });

    it('on every other route too: changes, events, webhooks, result, and a submit that reads none', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        assertRepeated(await c.get('/v1/jobs/changes?since=0&limit=1&since=5'), 'since');
        assertRepeated(await c.get(`/v1/jobs/${id}/events?since=0&since=1`), 'since');
        assertRepeated(await c.get('/v1/webhooks?limit=1&limit=2'), 'limit');
        assertRepeated(await c.get(`/v1/jobs/${id}/result?onComplete=a&onComplete=b`), 'onComplete');
        // A route that reads no parameter refuses them as well, and nothing is created.
        const before = (await listAll(c)).length;
        assertRepeated(await c.post('/v1/jobs?x=1&x=2', { type: 'report.export', payload: {} }), 'x');
        assert.equal((await listAll(c)).length, before, 'the refused submit created a job');
    });

    it('names are compared percent-decoded: lim%69t is limit', async () => {
        const { c } = tenant(d);
        await submit(c);
        await submit(c);
        assertRepeated(await c.get('/v1/jobs?limit=5&lim%69t=600'), 'limit');
        assertRepeated(await c.get('/v1/jobs?%73tatus=queued&status=queued'), 'status');
        // Alone, the encoded name is the parameter itself.
        const one = expectStatus(await c.get('/v1/jobs?lim%69t=1'), 200);
        assert.equal(one.json.items.length, 1, one.text);
        // Parameters without a name are not parameters: nothing is repeated.
        expectStatus(await c.get('/v1/jobs?&&limit=1&&'), 200);
    });
});
