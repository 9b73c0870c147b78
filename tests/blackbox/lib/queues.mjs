// Queues (CONTRACT.md section 11) for the black-box tests: reading and patching a queue, and the two nodes on one
// PostgreSQL database that cluster/queues.test.mjs and cluster/groups_limits.test.mjs share.

import { startDaemon, freshStore } from './daemon.mjs';
import { expectStatus } from './jobs.mjs';

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
