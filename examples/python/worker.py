#!/usr/bin/env python3
"""A worker for acceptd in Python, on the acceptd library (clients/python): lease, heartbeat with progress,
complete.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/worker.py TYPE [--jobs N]

The library's Worker parks a lease request (the daemon holds it until a job of TYPE is queued), runs work()
on each job while heartbeats extend the lease, and completes the job with what work() returns: here, the
payload echoed back with the number of its keys. Each step reports its progress with a heartbeat and stops
when one answers that a cancel was requested (the library then acknowledges the cancel). Runs until N jobs
are done (default: forever) or SIGINT/SIGTERM; prints each step on stderr.

A traced job (its submit carried a W3C traceparent: docs/tracing.md) continues its trace here: the lease's
traceparent is job.traceparent, the library sends it on its own calls about the job, and work() logs the trace
id and the traceparent it would send on its own calls downstream (a child span of the attempt's).
"""

import os
import secrets
import signal
import sys
import time

# The library from the checkout when it is not installed (pip install ./clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from acceptd import Worker  # noqa: E402

BASE = os.environ.get("ACCEPTD_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("ACCEPTD_KEY")


def log(msg):
    print(f"worker: {msg}", file=sys.stderr, flush=True)


def child_traceparent(traceparent):
    """A child of the lease's traceparent (version-traceid-parentid-flags): the same trace, a new span id."""
    version, trace_id, _, flags = traceparent.split("-")[:4]
    return f"{version}-{trace_id}-{secrets.token_hex(8)}-{flags}"


def work(job):
    """The job's work: three steps, a heartbeat after each. Returns the result, or None when cancelled."""
    payload = job.payload or {}
    if job.traceparent:
        # Pass it on: a downstream call sends this `traceparent` (and job.tracestate) as its headers.
        log(f"{job.id}: trace {job.trace_id} (lease {job.traceparent}); "
            f"downstream traceparent {child_traceparent(job.traceparent)}")
    for step, progress in enumerate((25, 50, 75), start=1):
        time.sleep(0.1)  # stands for real work
        cancelled = job.heartbeat(progress, f"step {step} of 3")
        log(f"{job.id}: heartbeat progress={progress}")
        if cancelled:
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
    worker = Worker(BASE, KEY, [job_type], work, concurrency=1, log=log)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop(join=False))
    worker.run(max_jobs=limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
