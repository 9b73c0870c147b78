// Checks answers of the real daemon against docs/openapi.json, for the black-box harness: every answer a test
// receives through api() (daemon.mjs) or the SSE client (sse.mjs) goes through check(). An answer the document
// does not describe (a path, a status, a missing required header, a body off its schema) is a violation:
// check() returns it as text, the caller throws it, and every violation of the process is listed again by an
// after() hook, so that a test catching the throw still fails its file.
//
//   ACCEPTD_OPENAPI_VALIDATE=0   skip the checks (for debugging only; the suite runs with them)
//
// The lookup is generic: a path of the document matches by its template ({x} is one segment without ':'),
// literal paths before templated ones. What no path matches is answered by the document's
// `x-acceptd-any-path` (404, 405, a CORS preflight, ...) or, for a path the configuration declares, by the
// operation marked `x-acceptd-configured`: `route` for a POST, `resource` for a GET.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as nodeTest from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const DOC_FILE = path.join(REPO_ROOT, 'docs', 'openapi.json');
export const enabled = process.env.ACCEPTD_OPENAPI_VALIDATE !== '0';

const DOC_ID = 'acceptd-openapi';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let state = null; // {doc, ajv, routes, anyPath, configured, validators}

const violations = [];

function escapePointer(s) {
    return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

function byPointer(doc, pointer) {
    let v = doc;
    for (const raw of pointer.split('/').slice(1)) {
        const k = raw.replace(/~1/g, '/').replace(/~0/g, '~');
        if (v === undefined || v === null) return undefined;
        v = v[k];
    }
    return v;
}

/** Follow $ref (local ones only) from the object at pointer: {obj, pointer} of what it finally names. */
function resolve(doc, obj, pointer) {
    for (let i = 0; obj && typeof obj.$ref === 'string' && i < 16; i++) {
        if (!obj.$ref.startsWith('#/')) throw new Error(`openapi.mjs: only local $refs are followed: ${obj.$ref}`);
        pointer = obj.$ref.slice(1);
        obj = byPointer(doc, pointer);
    }
    return { obj, pointer };
}

function load() {
    if (state) return state;
    const doc = JSON.parse(fs.readFileSync(DOC_FILE, 'utf8'));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(doc, DOC_ID, undefined, false); // an OpenAPI document, not a schema: not checked as one
    const routes = [];
    const configured = {};
    for (const [template, rawItem] of Object.entries(doc.paths ?? {})) {
        const { obj: item, pointer } = resolve(doc, rawItem, `/paths/${escapePointer(template)}`);
        const params = (template.match(/\{[^}]+\}/g) ?? []).length;
        const re = new RegExp(
            '^' +
                template
                    .split(/\{[^}]+\}/)
                    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
                    .join('[^/:]+') +
                '$',
        );
        routes.push({ template, re, params, item, pointer });
        for (const m of METHODS) {
            const kind = item[m]?.['x-acceptd-configured'];
            if (kind) configured[kind] = { template, op: item[m], pointer: `${pointer}/${m}` };
        }
    }
    // Literal paths first (/v1/jobs/changes before /v1/jobs/{id}), as the daemon's route table has them.
    routes.sort((a, b) => a.params - b.params);
    state = { doc, ajv, routes, anyPath: doc['x-acceptd-any-path'] ?? {}, configured, validators: new Map() };
    return state;
}

function validatorAt(pointer) {
    const s = load();
    let v = s.validators.get(pointer);
    if (!v) {
        v = s.ajv.getSchema(`${DOC_ID}#${pointer.split('/').map(encodeURIComponent).join('/')}`);
        if (!v) throw new Error(`openapi.mjs: no schema at ${pointer}`);
        s.validators.set(pointer, v);
    }
    return v;
}

function schemaErrors(v) {
    return (v.errors ?? [])
        .slice(0, 5)
        .map((e) => `${e.instancePath || '(root)'} ${e.message}${e.params && Object.keys(e.params).length ? ' ' + JSON.stringify(e.params) : ''}`)
        .join('; ');
}

/** The response object documented for status among responses (exact, then 4XX, then default), or null. */
function pickResponse(responses, status) {
    if (!responses) return null;
    for (const k of [String(status), `${String(status)[0]}XX`, 'default']) {
        if (responses[k] !== undefined) return k;
    }
    return null;
}

/** The operation answering method on pathname: {op, pointer, template, anyPath} or {error}. */
function findOperation(method, pathname) {
    const s = load();
    const m = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase();
    const route = s.routes.find((r) => r.re.test(pathname));
    if (route && route.item[m]) {
        const op = route.item[m];
        return { op, pointer: `${route.pointer}/${m}`, template: route.template, configured: Boolean(op['x-acceptd-configured']) };
    }
    if (route) return { template: route.template, anyPathOnly: true };
    if (m === 'post' && s.configured.route) return { ...s.configured.route, configured: true, unlisted: true };
    if (m === 'get' && s.configured.resource) return { ...s.configured.resource, configured: true, unlisted: true };
    return { template: null, anyPathOnly: true };
}

function headerValue(headers, name) {
    if (typeof headers.get === 'function') return headers.get(name);
    const v = headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(', ') : v ?? null;
}

function checkHeaders(s, response, responsePointer, headers, problems) {
    for (const [name, raw] of Object.entries(response.headers ?? {})) {
        const { obj: h, pointer } = resolve(s.doc, raw, `${responsePointer}/headers/${escapePointer(name)}`);
        const value = headerValue(headers, name);
        if (value === null || value === undefined) {
            if (h.required) problems.push(`required header ${name} is missing`);
            continue;
        }
        if (!h.schema) continue;
        const schema = resolve(s.doc, h.schema, `${pointer}/schema`);
        const type = schema.obj.type;
        let parsed = value;
        if (type === 'integer' || type === 'number') {
            if (!/^-?\d+(\.\d+)?$/.test(value)) {
                problems.push(`header ${name}: ${JSON.stringify(value)} is not a number`);
                continue;
            }
            parsed = Number(value);
        }
        const v = validatorAt(schema.pointer);
        if (!v(parsed)) problems.push(`header ${name}: ${JSON.stringify(value)}: ${schemaErrors(v)}`);
    }
}

function checkBody(s, response, responsePointer, { contentType, text, bodyRead, isHead }, problems) {
    if (!bodyRead || isHead) return;
    const hasBody = text !== undefined && text !== null && text.length > 0;
    const content = response.content;
    if (!content) {
        if (hasBody) problems.push(`a body (${contentType || 'no content type'}) where the document has none`);
        return;
    }
    if (!hasBody && !contentType) return; // an empty answer (a redirect to a result elsewhere)
    const media = (contentType ?? '').split(';')[0].trim().toLowerCase();
    // The exact media type, else a range (`image/*`, `*/*`: a result artifact has its worker's type).
    const keys = Object.keys(content);
    const key =
        keys.find((k) => k.toLowerCase() === media) ?? keys.find((k) => k.toLowerCase() === `${media.split('/')[0]}/*`) ?? keys.find((k) => k === '*/*');
    if (!key) {
        problems.push(`media type ${JSON.stringify(media)} is not documented (${keys.join(', ')})`);
        return;
    }
    if (!/(^application\/json$|\+json$)/.test(key.toLowerCase())) return; // SSE streams, Prometheus text, bytes: not JSON Schema's
    if (!content[key].schema) return;
    let body;
    try {
        body = JSON.parse(text);
    } catch (e) {
        problems.push(`the ${media} body is not JSON: ${e.message}`);
        return;
    }
    const v = validatorAt(`${responsePointer}/content/${escapePointer(key)}/schema`);
    if (!v(body)) problems.push(`body: ${schemaErrors(v)}`);
}

/**
 * Check one answer. method, target (path and query, or a URL), status, headers (fetch Headers or a
 * lowercase-name map), contentType, text (the body as read), bodyRead (false when the test did not read it).
 * Returns null, or the violation as one line naming method, path, status and what is wrong, also recorded
 * for the after() hook unless record is false.
 */
export function check({ method, target, status, headers, text, bodyRead = true, record = true }) {
    if (!enabled) return null;
    const s = load();
    const pathname = new URL(target, 'http://x').pathname;
    const contentType = headerValue(headers, 'content-type');
    const isHead = method.toUpperCase() === 'HEAD';
    const found = findOperation(method, pathname);
    const problems = [];
    let response = null;
    let responsePointer = null;
    let where = found.template ?? '(no documented path)';
    if (!found.anyPathOnly) {
        const k = pickResponse(found.op.responses, status);
        if (k) {
            ({ obj: response, pointer: responsePointer } = resolve(s.doc, found.op.responses[k], `${found.pointer}/responses/${escapePointer(k)}`));
            where = `${method.toUpperCase()} ${found.template} ${k}`;
        }
    }
    // A path the configuration declares may not be there at all, and every path may be asked with a method
    // it has not: those answers are the document's answers on any path.
    if (!response && (found.anyPathOnly || found.configured)) {
        const k = pickResponse(s.anyPath, status);
        if (k) {
            ({ obj: response, pointer: responsePointer } = resolve(s.doc, s.anyPath[k], `/x-acceptd-any-path/${k}`));
            where = `any path ${k}`;
        }
    }
    if (!response) {
        problems.push(found.anyPathOnly && !found.template ? 'no documented path or any-path answer for it' : `status ${status} is not documented`);
    } else {
        checkHeaders(s, response, responsePointer, headers, problems);
        checkBody(s, response, responsePointer, { contentType, text, bodyRead, isHead }, problems);
    }
    if (problems.length === 0) return null;
    const snippet = typeof text === 'string' && text.length > 0 ? ` [body: ${text.slice(0, 300)}]` : '';
    const msg = `OpenAPI violation: ${method.toUpperCase()} ${target.length > 200 ? target.slice(0, 200) + '...' : target} -> ${status} (${where}): ${problems.join('; ')}${snippet}`;
    if (record) violations.push(msg);
    return msg;
}

/**
 * Check the data of one server-sent event (an event of a collector in sse.mjs) against the schema the
 * document gives its name (`x-acceptd-events` of the text/event-stream answer). Events of other names are
 * not checked. Returns null or the violation (recorded).
 */
export function checkEvent({ event, data, id }) {
    if (!enabled) return null;
    const s = load();
    if (s.events === undefined) {
        s.events = {};
        const { obj, pointer } = resolve(s.doc, s.doc.components.responses.EventStream, '/components/responses/EventStream');
        for (const name of Object.keys(obj.content['text/event-stream']['x-acceptd-events'] ?? {})) {
            s.events[name] = `${pointer}/content/text~1event-stream/x-acceptd-events/${name}`;
        }
    }
    const at = s.events[event];
    if (!at) return null;
    let value;
    try {
        value = JSON.parse(data);
    } catch (e) {
        value = undefined;
    }
    const v = validatorAt(at);
    if (value !== undefined && v(value)) return null;
    const msg = `OpenAPI violation: server-sent event ${event} (id ${id}): ${value === undefined ? 'data is not JSON' : schemaErrors(v)} [data: ${String(data).slice(0, 300)}]`;
    violations.push(msg);
    return msg;
}

/** The violations recorded in this process so far. */
export function recorded() {
    return violations.slice();
}

// A test may catch what its helper threw (a request expected to fail, say): the file still fails here.
nodeTest.after(() => {
    if (violations.length > 0) {
        throw new Error(`${violations.length} answer(s) not as docs/openapi.json describes them:\n${violations.slice(0, 50).join('\n')}`);
    }
});
