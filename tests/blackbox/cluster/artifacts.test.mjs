// Result artifacts across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder): the bytes are in the database, so a node serves what another received. The single-node cases are in
// ../artifacts.test.mjs.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, api, freshStore } from '../lib/daemon.mjs';
import { expectStatus, getJob, leaseOne, show, submit, waitUntil } from '../lib/jobs.mjs';
import { PART_CAP, artifactsConf, bin, config, patterned, putPart, sha256hex, stopClean, upload } from '../lib/artifacts.mjs';

// The suite starts and stops its daemons inside its one test: with a suite-level after() hook, Node 20's runner
// now and then ran the hook (stopping the daemon) while the suite's only test was still running.
describe('result artifacts: two nodes on one PostgreSQL database', () => {
    it('a part goes to one node and the next to the other; each node serves the whole, ranges and a signed URL', async () => {
        const store = freshStore();
        const conf = config({ limits: `{ maxBodyBytes: 4096, maxUploadPartBytes: ${PART_CAP} }`, artifacts: artifactsConf({ gc: 60 }) }) +
            'signingKey: "artifact-cluster-signing-key-0123456789"\n';
        const a = await startDaemon({ config: conf, store });
        const b = await startDaemon({ config: conf, store });
        try {
            const id = (await submit(api(a, 'ka'), { type: 'art.cluster', payload: {} })).json.id;
            const { leaseId } = await leaseOne(api(b, 'wa'), 'art.cluster', { expectId: id, leaseSeconds: 60 });
            const data = patterned(2 * PART_CAP + 777, 81);
            // Part by part on alternate nodes: the upload's state is in the database, not in a node.
            expectStatus(await putPart(a, 'wa', id, leaseId, data.subarray(0, PART_CAP), { last: false }), 204);
            expectStatus(await putPart(b, 'wa', id, leaseId, data.subarray(PART_CAP, 2 * PART_CAP), { offset: PART_CAP, last: false }), 204);
            const head = await bin(a, 'wa', 'HEAD', `/v1/jobs/${id}/result`, { headers: { 'lease-id': leaseId } });
            assert.equal(head.headers.get('upload-offset'), String(2 * PART_CAP));
            expectStatus(await putPart(a, 'wa', id, leaseId, data.subarray(2 * PART_CAP), { offset: 2 * PART_CAP, last: true }), 200);
            expectStatus(await api(b, 'wa').post(`/v1/jobs/${id}:complete`, { leaseId, artifact: true }), 200);
            for (const d of [a, b]) {
                // A node learns of the other's commit from the database's notifications, a moment later.
                await waitUntil(() => getJob(api(d, 'ka'), id), (j) => j.status === 'succeeded', { what: `node ${d.url} to see the job succeed` });
                const got = expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`), 200);
                assert.equal(sha256hex(got.buf), sha256hex(data), `node ${d.url} served other bytes`);
                const part = expectStatus(await bin(d, 'ka', 'GET', `/v1/jobs/${id}/result`, { headers: { range: `bytes=${PART_CAP - 5}-${PART_CAP + 4}` } }), 206);
                assert.ok(part.buf.equals(data.subarray(PART_CAP - 5, PART_CAP + 5)), 'a range across two parts differs');
            }
            // A signed URL made by one node works on the other (the nodes share signingKey).
            const redirect = await bin(a, 'ka', 'GET', `/v1/jobs/${id}?onComplete=redirect`);
            assert.equal(redirect.status, 303, show(redirect));
            const viaB = expectStatus(await bin(b, null, 'GET', redirect.headers.get('location')), 200);
            assert.equal(sha256hex(viaB.buf), sha256hex(data));
        } finally {
            await stopClean(a);
            await stopClean(b);
        }
    });
});
