#!/usr/bin/env python3
"""A worker for acceptd in Python, standard library only: lease, heartbeat with progress, complete.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/worker.py TYPE [--jobs N]

Leases one job at a time with a long poll (the daemon holds the request until a job of TYPE is queued or
`wait` seconds pass, then answers 204), reports progress with heartbeats, which also extend the lease, and
completes the job with a result: here, the payload echoed back with the number of its keys. A heartbeat
answering cancelRequested stops the work and acknowledges the cancel. Runs until N jobs are done (default:
forever) or SIGINT/SIGTERM; prints each step on stderr.
"""

import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ.get("ACCEPTD_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("ACCEPTD_KEY")
LEASE_SECONDS = 30
WAIT_SECONDS = 20
NAME = f"{socket.gethostname()}/{os.getpid()}/python"

stopping = False


def log(msg):
    print(f"worker: {msg}", file=sys.stderr, flush=True)


def call(method, path, body=None, timeout=WAIT_SECONDS + 10):
    """(status, parsed JSON or None). Answers other than 2xx come back as they are, not as exceptions."""
    headers = {"Content-Type": "application/json"}
    if KEY:
        headers["Authorization"] = f"Bearer {KEY}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            status, raw = res.status, res.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    return status, (json.loads(raw) if raw else None)


def work(job, lease_id):
    """The job's work: three steps, a heartbeat after each. Returns the result, or None when cancelled."""
    payload = job.get("payload") or {}
    for step, progress in enumerate((25, 50, 75), start=1):
        time.sleep(0.1)  # stands for real work
        status, hb = call("POST", f"/v1/jobs/{job['id']}:heartbeat",
                          {"leaseId": lease_id, "progress": progress, "message": f"step {step} of 3",
                           "leaseSeconds": LEASE_SECONDS})
        if status != 200:
            raise RuntimeError(f"heartbeat answered {status}: {hb}")  # the lease is lost: drop the job
        log(f"{job['id']}: heartbeat progress={progress}")
        if hb.get("cancelRequested"):
            return None
    return {"echo": payload, "keys": len(payload) if isinstance(payload, dict) else 0, "worker": "python"}


def main():
    args = sys.argv[1:]
    if not args:
        print("usage: worker.py TYPE [--jobs N]", file=sys.stderr)
        return 2
    job_type, limit = args[0], None
    if len(args) == 3 and args[1] == "--jobs":
        limit = int(args[2])

    def stop(signum, frame):
        global stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    done = 0
    while not stopping and (limit is None or done < limit):
        status, body = call("POST", "/v1/leases", {"types": [job_type], "max": 1, "wait": WAIT_SECONDS,
                                                   "leaseSeconds": LEASE_SECONDS, "worker": NAME})
        if status == 204:
            continue  # nothing within `wait`: ask again
        if status != 200:
            log(f"lease refused: {status} {body}")
            return 1
        for lease in body["leases"]:
            job, lease_id = lease["job"], lease["leaseId"]
            log(f"leased {job['id']} (attempt {job['attempt']}/{job['maxAttempts']})")
            try:
                result = work(job, lease_id)
            except RuntimeError as e:
                log(f"{job['id']}: {e}")
                continue
            if result is None:
                status, _ = call("POST", f"/v1/jobs/{job['id']}:cancel", {"leaseId": lease_id})
                log(f"{job['id']}: cancel acknowledged ({status})")
            else:
                status, ans = call("POST", f"/v1/jobs/{job['id']}:complete", {"leaseId": lease_id, "result": result})
                log(f"{job['id']}: completed ({status}), now {ans['status'] if ans else '?'}")
            done += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
