#!/usr/bin/env python3
"""A client of acceptd in Python, on the acceptd library (clients/python): submit, poll, then follow the
job's events.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/client.py TYPE ['{"payload": ...}']

Job.wait() does all of this in one call (SSE with resume, else polling); the steps are spelled out here to
show the protocol:
1. Submit (POST /v1/jobs): 202 Accepted, with the job and its Location; the library adds an Idempotency-Key.
2. Poll while the job is queued, the polite way: wait what Retry-After says between requests and send the
   last ETag in If-None-Match, so that an unchanged job costs a 304 without a body (Job.refresh()).
3. Once a worker has it, follow its Server-Sent Events (Job.events()). To show how a client resumes, the
   first connection is dropped after one event and the second one sends Last-Event-ID: the server sends only
   the events after it, none twice. The `done` event is the last one.
4. Read the result (Job.result()) and print it on stdout.

Each step is printed on stderr. Exits 0 when the job succeeded, 1 otherwise.
"""

import json
import os
import sys
import time

# The library from the checkout when it is not installed (pip install ./clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from acceptd import Client, ProblemError  # noqa: E402

BASE = os.environ.get("ACCEPTD_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("ACCEPTD_KEY")
MAX_RETRY_AFTER = 30  # never trust a server's hint blindly


def log(msg):
    print(f"client: {msg}", file=sys.stderr, flush=True)


def main():
    if len(sys.argv) < 2:
        print("usage: client.py TYPE [PAYLOAD_JSON]", file=sys.stderr)
        return 2
    job_type = sys.argv[1]
    payload = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    client = Client(BASE, KEY)

    # 1. Submit.
    try:
        job = client.submit(job_type, payload)
    except ProblemError as e:
        log(f"submit refused: {e}")
        return 1
    log(f"submitted {job.id} (202), Location: {job.path}")

    # 2. Poll while queued, with Retry-After and If-None-Match.
    while job.status == "queued":
        wait = min(job.retry_after if job.retry_after is not None else 1.0, MAX_RETRY_AFTER)
        log(f"status {job.status}: polling again in {wait:g}s (Retry-After) with If-None-Match: {job.etag}")
        time.sleep(wait)
        if job.refresh():
            log(f"poll: 200, status {job.status}, new ETag {job.etag}")
        else:
            log("poll: 304 Not Modified, the job has not changed")

    # 3. Follow the events; drop the first connection after one event and resume from its id.
    last_id = None
    for ev_id, event, data in job.events():
        last_id = ev_id
        log(f"event {event} id={ev_id} {json.dumps(data)}")
        break  # leaving the loop closes the connection
    log(f"connection dropped; resuming with Last-Event-ID: {last_id}")
    for ev_id, event, data in job.events(last_event_id=last_id):
        log(f"event {event} id={ev_id} {json.dumps(data) if event != 'done' else ''}".rstrip())
    if not job.done:  # the stream ended early (or answered 204): the resource has the outcome
        job.refresh()

    # 4. The result.
    try:
        result = job.result()
    except ProblemError as e:
        log(f"job {job.id} ended {job.status}: {e}")
        return 1
    log(f"job {job.id} ended {job.status}; GET {job.path}/result")
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if job.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
