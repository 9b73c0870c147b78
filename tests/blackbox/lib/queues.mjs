// Queues (CONTRACT.md section 11) for the black-box tests: reading and patching a queue, and the two nodes on one
// PostgreSQL database, with workers on both, that cluster/queues.test.mjs and cluster/groups_limits.test.mjs share.

import assert from 'node:assert/strict';
import { api, startDaemon, freshStore } from './daemon.mjs';
import { complete, expectStatus, lease, sleep } from './jobs.mjs';

const MERGE = { 'content-type': 'application/merge-patch+json' };

/** PATCH /v1/queues/{type} with body, as a merge patch unless headers say otherwise. */
export function patchQueue(a, type, body, headers = MERGE) {
    return a.req('PATCH', `/v1/queues/${encodeURIComponent(type)}`, { body, headers });
}

/** GET /v1/queues/{type}: the queue (a 200 is asserted). */
export async function getQueue(x, type) {
    return expectStatus(await x.get(`/v1/queues/${encodeURIComponent(type)}`), 200).json;
}

/** Two daemons on one fresh database with tenant c's keys kc (client), kw (worker), ka (admin) and type cl.job. */
export async function startPair() {
    const store = freshStore();
    const config = `keys:
  - { key: "kc", tenant: c, role: client }
  - { key: "kw", tenant: c, role: worker }
  - { key: "ka", tenant: c, role: admin }
types:
  cl.job: {}
limits: { maxWaitSeconds: 5 }
`;
    const a = await startDaemon({ config, store });
    try {
        return [a, await startDaemon({ config, store })];
    } catch (e) {
        await a.stop();
        throw e;
    }
}

/**
 * Runs `jobs` queued cl.job jobs to completion with three workers on each of the nodes, each leasing up to two at a
 * time and holding them 60 ms, while sample(node) runs every 10 ms on the nodes in turn. Returns {maxHeld, samples}:
 * the most leases the workers held at once per key(job), and how many samples ran. Fails after 60 s.
 */
export async function runOnPair(nodes, jobs, key, sample) {
    const held = {};
    const maxHeld = {};
    let done = 0;
    let samples = 0;
    const worker = async (w) => {
        while (done < jobs) {
            const res = await lease(w, 'cl.job', { max: 2, wait: 2 });
            if (res.status === 204) continue;
            const got = expectStatus(res, 200).json.leases;
            for (const l of got) {
                const k = key(l.job);
                held[k] = (held[k] ?? 0) + 1;
                maxHeld[k] = Math.max(maxHeld[k] ?? 0, held[k]);
            }
            await sleep(60);
            for (const l of got) {
                held[key(l.job)]--;
                await complete(w, l.job.id, l.leaseId);
                done++;
            }
        }
    };
    const sampler = async () => {
        for (let i = 0; done < jobs; i++) {
            await sample(nodes[i % nodes.length]);
            samples++;
            await sleep(10);
        }
    };
    const workers = nodes.flatMap((n) => [0, 1, 2].map(() => worker(api(n, 'kw'))));
    await Promise.race([
        Promise.all([...workers, sampler()]),
        sleep(60_000).then(() => assert.fail(`only ${done} of ${jobs} jobs done within 60 s`)),
    ]);
    return { maxHeld, samples };
}
