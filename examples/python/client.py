#!/usr/bin/env python3
"""A client of acceptd in Python, standard library only: submit, poll, then follow the job's events.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/client.py TYPE ['{"payload": ...}']

1. Submit with POST /v1/jobs: 202 Accepted, with the job and its Location.
2. Poll the Location while the job is queued, the polite way: wait what Retry-After says between requests and
   send the last ETag in If-None-Match, so that an unchanged job costs a 304 without a body.
3. Once a worker has it, follow its Server-Sent Events (GET /v1/jobs/{id}/events). To show how a client
   resumes, the first connection is dropped after one event and the second one sends Last-Event-ID: the
   server sends only the events after it, none twice. The `done` event is the last one.
4. Read the result (GET /v1/jobs/{id}/result) and print it on stdout.

Each step is printed on stderr. Exits 0 when the job succeeded, 1 otherwise.
"""

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

BASE = os.environ.get("ACCEPTD_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("ACCEPTD_KEY")
MAX_RETRY_AFTER = 30  # never trust a server's hint blindly


def log(msg):
    print(f"client: {msg}", file=sys.stderr, flush=True)


def headers(extra=None):
    h = {"Accept": "application/json"}
    if KEY:
        h["Authorization"] = f"Bearer {KEY}"
    h.update(extra or {})
    return h


def request(method, path, body=None, extra=None):
    """(status, headers, body bytes); non-2xx answers are returned, not raised."""
    data = json.dumps(body).encode() if body is not None else None
    h = headers(extra)
    if data is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(urllib.parse.urljoin(BASE + "/", path), data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, res.headers, res.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def retry_after(h, default=1.0):
    v = h.get("Retry-After")
    try:
        return min(max(float(v), 0.0), MAX_RETRY_AFTER) if v is not None else default
    except ValueError:
        return default  # an HTTP-date: acceptd sends seconds


def events(job_path, last_event_id=None, stop_after=None):
    """Read the job's event stream; yields (id, event, data). Stops at `done` or after stop_after events."""
    url = urllib.parse.urlsplit(BASE)
    conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(url.hostname, url.port, timeout=60)
    h = headers({"Accept": "text/event-stream"})
    if last_event_id is not None:
        h["Last-Event-ID"] = last_event_id
    conn.request("GET", job_path + "/events", headers=h)
    res = conn.getresponse()
    try:
        if res.status == 204:
            return  # nothing after last_event_id: the job had already ended
        if res.status != 200:
            raise RuntimeError(f"event stream answered {res.status}: {res.read()[:200]!r}")
        seen = 0
        ev = {"id": None, "event": "message", "data": []}
        while True:
            line = res.readline()
            if not line:
                return  # the server closed the stream
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if ev["data"]:
                    yield ev["id"], ev["event"], "\n".join(ev["data"])
                    seen += 1
                    if ev["event"] == "done" or (stop_after is not None and seen >= stop_after):
                        return
                ev = {"id": ev["id"], "event": "message", "data": []}
                continue
            if line.startswith(":"):
                continue  # a heartbeat comment
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                ev["id"] = value
            elif field == "event":
                ev["event"] = value
            elif field == "data":
                ev["data"].append(value)
    finally:
        conn.close()


def main():
    if len(sys.argv) < 2:
        print("usage: client.py TYPE [PAYLOAD_JSON]", file=sys.stderr)
        return 2
    job_type = sys.argv[1]
    payload = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}

    # 1. Submit.
    status, h, body = request("POST", "/v1/jobs", {"type": job_type, "payload": payload})
    if status != 202:
        log(f"submit refused: {status} {body[:300]!r}")
        return 1
    job = json.loads(body)
    location = h["Location"]
    log(f"submitted {job['id']} (202), Location: {location}")

    # 2. Poll while queued, with Retry-After and If-None-Match.
    etag = h.get("ETag")
    while job["status"] == "queued":
        wait = retry_after(h)
        log(f"status {job['status']}: polling again in {wait:g}s (Retry-After) with If-None-Match: {etag}")
        time.sleep(wait)
        status, h, body = request("GET", location, extra={"If-None-Match": etag} if etag else None)
        if status == 304:
            log("poll: 304 Not Modified, the job has not changed")
        elif status == 200:
            job, etag = json.loads(body), h.get("ETag")
            log(f"poll: 200, status {job['status']}, new ETag {etag}")
        else:
            log(f"poll answered {status}: {body[:300]!r}")
            return 1

    # 3. Follow the events; drop the first connection after one event and resume from its id.
    job_path = job["links"]["self"]
    last_id, final = None, None
    for ev_id, event, data in events(job_path, stop_after=1):
        last_id = ev_id
        log(f"event {event} id={ev_id} {data}")
    log(f"connection dropped; resuming with Last-Event-ID: {last_id}")
    for ev_id, event, data in events(job_path, last_event_id=last_id):
        log(f"event {event} id={ev_id} {data if event != 'done' else ''}".rstrip())
        if event == "done":
            final = json.loads(data)
    if final is None:  # the stream ended early (or answered 204): the resource has the outcome
        status, h, body = request("GET", location)
        final = json.loads(body)

    # 4. The result.
    status, h, body = request("GET", final["links"]["result"])
    log(f"job {final['id']} ended {final['status']}; GET {final['links']['result']} -> {status}")
    sys.stdout.write(body.decode("utf-8") + "\n")
    return 0 if final["status"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
