// index.mjs - the acceptd library for Node: Client and Job (client.mjs), Batch and Schedules (batches.mjs), Worker (worker.mjs), verifyWebhook
// (webhook.mjs) and ProblemError (http.mjs). No dependency beyond Node's standard library.

export { Client, Job, isTerminal } from './client.mjs';
export { Batch, Schedules } from './batches.mjs';
export { Worker, JobAborted } from './worker.mjs';
export { verifyWebhook, WebhookVerificationError } from './webhook.mjs';
export { ProblemError } from './http.mjs';
