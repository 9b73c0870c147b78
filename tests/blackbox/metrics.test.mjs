// GET /metrics (docs/operations.md, "Metrics"): after a mixed workload the Prometheus text passes
// `promtool check metrics`, and each metric moves when its event happens (a scrape before and after).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe } from 'node:test';
import { api, it, startDaemon } from './lib/daemon.mjs';
import { expectStatus, lease, leaseOne, complete, fail, submit, sleep, waitUntil } from './lib/jobs.mjs';
import { openSse } from './lib/sse.mjs';
import { createEndpoint, startReceiver, stopClean, webhookConfig } from './lib/webhooks.mjs';

const PROMTOOL = '/usr/bin/promtool';

// One sample line: name{labels} value. Labels are compared as written by the daemon (sorted here).
function parse(text) {
    const samples = new Map();
    for (const line of text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
        assert.ok(m, `not a sample line: ${JSON.stringify(line)}`);
        const labels = m[2] ? [...m[2].slice(1, -1).matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((x) => `${x[1]}=${x[2]}`).sort().join(',') : '';
        samples.set(`${m[1]}{${labels}}`, Number(m[3]));
    }
    return samples;
}

describe('GET /metrics', () => {
    let d, recv, adm, c, w, scrape;
    before(async () => {
        recv = await startReceiver();
        const config = webhookConfig({ schedule: ['0', '300ms'], extra: 'sse: { heartbeat: 300ms }\n' }).replace(
            'keys:\n',
            'keys:\n  - { key: "lim", tenant: lim, role: client, rateLimit: { requests: 1, window: 3600 } }\n',
        );
        d = await startDaemon({ config });
        adm = api(d, 'adm');
        c = api(d, 'ka');
        w = api(d, 'wa');
        scrape = async () => {
            const res = expectStatus(await adm.get('/metrics'), 200);
            assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
            return { text: res.text, m: parse(res.text) };
        };
    });
    after(async () => {
        if (d) await stopClean(d);
        if (recv) await recv.close();
    });

    const v = (s, key) => s.m.get(key) ?? 0;

    it('starts every counter at zero and names the build', async () => {
        const s = await scrape();
        assert.match(s.text, /^acceptd_build_info\{version="[^"]+",commit="[^"]+"\} 1$/m);
        for (const k of ['acceptd_leases_granted_total{}', 'acceptd_leases_expired_total{}', 'acceptd_leases_handed_off_total{}', 'acceptd_rate_limited_total{}', 'acceptd_store_errors_total{}', 'acceptd_webhook_deliveries_total{outcome=delivered}', 'acceptd_submit_duration_seconds_count{}'])
            assert.equal(s.m.get(k), 0, `${k} in\n${s.text}`);
    });

    it('counts requests by route template and status, and the submit latency', async () => {
        const s0 = await scrape();
        const id = (await submit(c)).json.id;
        expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        expectStatus(await c.get('/v1/jobs/job_nonexistent'), 404);
        expectStatus(await c.get('/no/such/path?sig=x'), 404);
        const s1 = await scrape();
        assert.equal(v(s1, 'acceptd_http_requests_total{code=202,route=/v1/jobs}') - v(s0, 'acceptd_http_requests_total{code=202,route=/v1/jobs}'), 1);
        assert.equal(v(s1, 'acceptd_http_requests_total{code=200,route=/v1/jobs/{id}}') - v(s0, 'acceptd_http_requests_total{code=200,route=/v1/jobs/{id}}'), 1);
        assert.equal(v(s1, 'acceptd_http_requests_total{code=404,route=/v1/jobs/{id}}') - v(s0, 'acceptd_http_requests_total{code=404,route=/v1/jobs/{id}}'), 1);
        assert.equal(v(s1, 'acceptd_http_requests_total{code=404,route=unmatched}') - v(s0, 'acceptd_http_requests_total{code=404,route=unmatched}'), 1);
        assert.ok(!s1.text.includes(id), 'a raw path (with a job id) is never a label');
        assert.equal(v(s1, 'acceptd_http_requests_total{code=200,route=/metrics}') - v(s0, 'acceptd_http_requests_total{code=200,route=/metrics}'), 1);
        assert.equal(v(s1, 'acceptd_submit_duration_seconds_count{}') - v(s0, 'acceptd_submit_duration_seconds_count{}'), 1);
        assert.ok(v(s1, 'acceptd_submit_duration_seconds_sum{}') > v(s0, 'acceptd_submit_duration_seconds_sum{}'));
        assert.ok(v(s1, 'acceptd_commit_batch_size_count{}') > v(s0, 'acceptd_commit_batch_size_count{}'));
        assert.ok(v(s1, 'acceptd_commit_batch_size_sum{}') > v(s0, 'acceptd_commit_batch_size_sum{}'));
        assert.ok(v(s1, 'acceptd_commit_duration_seconds_count{}') > v(s0, 'acceptd_commit_duration_seconds_count{}'));
    });

    it('keeps jobs by type and state from the store', async () => {
        const type = 'email.send';
        const key = (state) => `acceptd_jobs{state=${state},type=${type}}`;
        const s0 = await scrape();
        const id = (await submit(c, { type, payload: {} })).json.id;
        const s1 = await waitUntil(scrape, (s) => v(s, key('queued')) === v(s0, key('queued')) + 1, { what: 'queued count to grow' });
        const l = await leaseOne(w, type, { expectId: id });
        await waitUntil(scrape, (s) => v(s, key('queued')) === v(s1, key('queued')) - 1 && v(s, key('running')) === v(s1, key('running')) + 1, { what: 'running count to grow' });
        await complete(w, id, l.leaseId);
        await waitUntil(scrape, (s) => v(s, key('succeeded')) === v(s1, key('succeeded')) + 1, { what: 'succeeded count to grow' });
        // A failed job
        const id2 = (await submit(c, { type, payload: {}, maxAttempts: 1 })).json.id;
        const l2 = await leaseOne(w, type, { expectId: id2 });
        await fail(w, id2, l2.leaseId);
        await waitUntil(scrape, (s) => v(s, key('failed')) === v(s1, key('failed')) + 1, { what: 'failed count to grow' });
    });

    it('counts leases granted, expired and handed off', async () => {
        const s0 = await scrape();
        const id = (await submit(c, { type: 'image.resize', payload: {} })).json.id;
        await leaseOne(w, 'image.resize', { expectId: id, leaseSeconds: 1 });
        const s1 = await scrape();
        assert.equal(v(s1, 'acceptd_leases_granted_total{}') - v(s0, 'acceptd_leases_granted_total{}'), 1);
        await waitUntil(scrape, (s) => v(s, 'acceptd_leases_expired_total{}') === v(s0, 'acceptd_leases_expired_total{}') + 1, { what: 'an expired lease' });
        // Drain the requeued job, then hand one off: a lease request waiting when the job is submitted.
        await leaseOne(w, 'image.resize', { expectId: id });
        const s2 = await scrape();
        const parked = lease(w, 'image.resize', { wait: 5 });
        await sleep(300); // let the lease request park; a hand-off is only counted when it was waiting
        await submit(c, { type: 'image.resize', payload: {} });
        expectStatus(await parked, 200);
        const s3 = await scrape();
        assert.equal(v(s3, 'acceptd_leases_handed_off_total{}') - v(s2, 'acceptd_leases_handed_off_total{}'), 1, s3.text);
        assert.equal(v(s3, 'acceptd_leases_granted_total{}') - v(s2, 'acceptd_leases_granted_total{}'), 1);
    });

    it('counts rate-limited requests', async () => {
        const lim = api(d, 'lim');
        const s0 = await scrape();
        expectStatus(await lim.get('/v1/jobs'), 200);
        expectStatus(await lim.get('/v1/jobs'), 429);
        const s1 = await scrape();
        assert.equal(v(s1, 'acceptd_rate_limited_total{}') - v(s0, 'acceptd_rate_limited_total{}'), 1);
        assert.equal(v(s1, 'acceptd_http_requests_total{code=429,route=/v1/jobs}') - v(s0, 'acceptd_http_requests_total{code=429,route=/v1/jobs}'), 1);
    });

    it('counts webhook deliveries by outcome with their latency', async () => {
        const s0 = await scrape();
        const cb = api(d, 'kb'); // tenant b: a queue of its own
        const wb = api(d, 'wb');
        await createEndpoint(cb, `${recv.url}/hook`, ['job.succeeded']);
        const id = (await submit(cb, { type: 'report.export', payload: {} })).json.id;
        const l = await leaseOne(wb, 'report.export', { expectId: id });
        await complete(wb, id, l.leaseId);
        const s1 = await waitUntil(scrape, (s) => v(s, 'acceptd_webhook_deliveries_total{outcome=delivered}') > v(s0, 'acceptd_webhook_deliveries_total{outcome=delivered}'), { what: 'a delivery' });
        assert.ok(recv.requests.length >= 1);
        assert.ok(v(s1, 'acceptd_webhook_delivery_duration_seconds_count{}') > v(s0, 'acceptd_webhook_delivery_duration_seconds_count{}'));
        // A receiver that fails: the attempt is counted as retrying.
        recv.respond = () => ({ status: 500 });
        const id2 = (await submit(cb, { type: 'report.export', payload: {} })).json.id;
        const l2 = await leaseOne(wb, 'report.export', { expectId: id2 });
        await complete(wb, id2, l2.leaseId);
        await waitUntil(scrape, (s) => v(s, 'acceptd_webhook_deliveries_total{outcome=retrying}') > v(s1, 'acceptd_webhook_deliveries_total{outcome=retrying}'), { what: 'a failed delivery' });
        recv.respond = () => ({ status: 200 });
    });

    it('shows open SSE streams, and promtool accepts the whole text after the workload', async () => {
        const s0 = await scrape();
        const id = (await submit(c)).json.id;
        const sse = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { authorization: 'Bearer ka' } });
        try {
            assert.equal(sse.status, 200);
            const s1 = await waitUntil(scrape, (s) => v(s, 'acceptd_sse_streams{}') === v(s0, 'acceptd_sse_streams{}') + 1, { what: 'an open stream' });
            const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: s1.text, encoding: 'utf8', timeout: 10_000 });
            assert.equal(r.status, 0, `promtool check metrics: ${r.stdout}${r.stderr}`);
        } finally {
            sse.close();
        }
        await waitUntil(scrape, (s) => v(s, 'acceptd_sse_streams{}') === v(s0, 'acceptd_sse_streams{}'), { what: 'the stream to close' });
    });
});
