#!/usr/bin/env python3
"""A client of acceptd in Python: submit a job, follow it to its end, read its result.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/client.py TYPE ['{"payload": ...}']

A thin user of the acceptd library (clients/python; in your project, `pip install ./clients/python`):
submit() sends an Idempotency-Key of its own; wait() follows the job's Server-Sent Events and resumes them
with Last-Event-ID when the connection breaks, or, when no stream can be had (a proxy that refuses them),
polls at the pace the daemon's Retry-After asks with If-None-Match. Prints each step on stderr and the
result on stdout; exits 0 when the job succeeded, 1 otherwise.
"""

import json
import os
import sys

# The library from the checkout when it is not installed (pip install ./clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from acceptd import Client, ProblemError  # noqa: E402


def log(msg):
    print(f"client: {msg}", file=sys.stderr, flush=True)


def main():
    if len(sys.argv) < 2:
        print("usage: client.py TYPE [PAYLOAD_JSON]", file=sys.stderr)
        return 2
    payload = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    client = Client(os.environ.get("ACCEPTD_URL", "http://127.0.0.1:8080").rstrip("/"), os.environ.get("ACCEPTD_KEY"))
    try:
        # 1. Submit: 202 Accepted with the job.
        job = client.submit(sys.argv[1], payload)
        log(f"submitted {job.id}")
        # 2. Follow it until it is final; each status and progress change on the way.
        job.wait(on_progress=lambda j: log(f"status={j.status} progress={j.progress} message={j.message}"))
        log(f"job {job.id} ended {job.status}")
        # 3. Its result: the document for succeeded or partialSuccess; a failed job raises its stored problem.
        result = job.result()
    except ProblemError as e:
        log(f"refused: {e.status} {e.code}: {e.detail or e.title}")
        print(json.dumps(e.problem))
        return 1
    print(json.dumps(result))
    return 0 if job.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
