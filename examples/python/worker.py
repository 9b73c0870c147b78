#!/usr/bin/env python3
"""A worker for acceptd in Python, on the acceptd library (clients/python): lease, heartbeat with progress,
complete.

    ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... python3 examples/python/worker.py TYPE [--jobs N]

The library's Worker parks a lease request (the daemon holds it until a job of TYPE is queued), runs work()
on each job while heartbeats extend the lease, and completes the job with what work() returns: here, the
payload echoed back with the number of its keys. Each step reports its progress with a heartbeat and stops
when one answers that a cancel was requested (the library then acknowledges the cancel). Runs until N jobs
are done (default: forever) or SIGINT/SIGTERM; prints each step on stderr.
"""

import os
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


def work(job):
    """The job's work: three steps, a heartbeat after each. Returns the result, or None when cancelled."""
    payload = job.payload or {}
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
