"""Worker against the real daemon: 200 jobs on 4 slots, one handler crash (the job comes back and succeeds
on its next attempt) and one cancel that the handler sees; and lean leases (Prefer: return=minimal)."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any

from acceptd import Client, JobContext, PermanentFailure, Worker

from .harness import Daemon, Proxy

d: Daemon


def setUpModule() -> None:
    global d
    d = Daemon().start()


def tearDownModule() -> None:
    d.stop()


class WorkerTest(unittest.TestCase):
    def test_200_jobs_on_4_slots_with_a_crash_and_a_cancel(self) -> None:
        ck, wk, _ = d.tenant()
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        crash_n, cancel_n = 17, 42
        lock = threading.Lock()
        running = 0
        most = 0
        attempts: dict[int, list[int]] = {}
        saw_cancel = threading.Event()
        cancel_started = threading.Event()

        def handler(ctx: JobContext) -> Any:
            nonlocal running, most
            n = ctx.payload["n"]
            with lock:
                running += 1
                most = max(most, running)
                attempts.setdefault(n, []).append(ctx.attempt)
            try:
                if n == crash_n and ctx.attempt == 1:
                    raise RuntimeError("the handler crashed")
                if n == cancel_n:
                    cancel_started.set()
                    if ctx.cancel_requested.wait(30):
                        saw_cancel.set()
                    return None
                time.sleep(0.01)
                return {"double": 2 * n}
            finally:
                with lock:
                    running -= 1

        proxy = Proxy(d.url)  # to see what the worker sent
        self.addCleanup(proxy.close)
        w = Worker(proxy.url, wk, ["work.item"], handler, concurrency=4, lease_seconds=6, wait_seconds=2)
        jobs = [c.submit("work.item", {"n": n}) for n in range(200)]
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(cancel_started.wait(60), "the job to cancel never ran")
        jobs[cancel_n].cancel()
        deadline = time.monotonic() + 150  # one bound for all: a lost path fails here rather than hangs
        for j in jobs:
            j.wait(timeout=max(1.0, deadline - time.monotonic()))
        w.stop()
        self.assertTrue(saw_cancel.is_set(), "the handler never saw cancel_requested")
        self.assertEqual(jobs[cancel_n].status, "cancelled")
        statuses = {j.data["payload"]["n"]: j.status for j in jobs}
        self.assertEqual([n for n, s in statuses.items() if s != "succeeded"], [cancel_n], statuses)
        for j in jobs:
            n = j.data["payload"]["n"]
            if n != cancel_n:
                self.assertEqual(j.data["result"], {"double": 2 * n})
        crashed = jobs[crash_n]
        self.assertEqual(crashed.data["attempt"], 2)
        self.assertEqual(attempts[crash_n], [1, 2])
        history = c.transport.request("GET", f"/v1/jobs/{crashed.id}/attempts").json()["attempts"]
        self.assertEqual([a["outcome"] for a in history], ["retrying", "succeeded"])
        self.assertEqual(w.done, 201)
        self.assertLessEqual(most, 4)
        self.assertGreater(most, 1, "the slots ran side by side")
        # Lean leases, and most jobs came with the report of the one before (next), not a lease request.
        leases = [r for r in proxy.log if r["path"] == "/v1/leases"]
        reports = [r for r in proxy.log if r["method"] == "POST" and not r["path"].endswith(":heartbeat")]
        self.assertTrue(all(r["headers"].get("prefer") == "return=minimal" for r in reports))
        self.assertTrue(all(r["answer_headers"].get("preference-applied") == "return=minimal"
                            for r in leases if r["status"] == 200))
        self.assertLess(len([r for r in leases if r["status"] == 200]), 100, len(leases))
        cancels = [r for r in proxy.log if r["path"] == f"/v1/jobs/{jobs[cancel_n].id}:cancel"]
        self.assertEqual(len(cancels), 1, "the worker acknowledged the cancel")

    def test_progress_and_permanent_failure(self) -> None:
        ck, wk, _ = d.tenant()
        c = Client(d.url, ck)
        self.addCleanup(c.close)

        def handler(ctx: JobContext) -> Any:
            if ctx.payload.get("fail"):
                raise PermanentFailure("bad input")
            ctx.progress(50, "half way")
            time.sleep(1.5)
            return "ok"

        w = Worker(d.url, wk, ["report.export"], handler, concurrency=2, lease_seconds=30, wait_seconds=1).start()
        self.addCleanup(w.stop)
        seen: list[tuple[str, int | None, str | None]] = []
        job = c.submit("report.export", {}).wait(timeout=60, on_progress=lambda j: seen.append(
            (j.status, j.progress, j.message)))
        self.assertEqual((job.status, job.result()), ("succeeded", "ok"))
        self.assertIn(("running", 50, "half way"), seen)
        bad = c.submit("report.export", {"fail": True}).wait(timeout=60)
        self.assertEqual(bad.status, "failed")
        self.assertEqual(bad.data["attempt"], 1, "a PermanentFailure uses no more attempts")
        self.assertIn("bad input", bad.data["error"]["detail"])

    def test_trace_context_reaches_the_handler_and_goes_on_each_call(self) -> None:
        """A job submitted with a traceparent is leased with its trace (docs/tracing.md): the handler sees it
        as ctx.traceparent, and the worker's calls about the job (heartbeats, upload parts, the report) send
        that traceparent; an untraced job's calls send none."""
        ck, wk, _ = d.tenant()
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        parent = f"00-{trace}-00f067aa0ba902b7-01"
        seen: dict[str, tuple[str | None, str | None, str | None]] = {}

        def handler(ctx: JobContext) -> Any:
            seen[ctx.type] = (ctx.traceparent, ctx.tracestate, ctx.trace_id)
            ctx.heartbeat(50, "half")
            if ctx.type == "file.make":
                ctx.upload_artifact(b"x" * 3000, part_bytes=1024)
                return None
            return {"ok": True}

        proxy = Proxy(d.url)
        self.addCleanup(proxy.close)
        traced = c.submit("file.make", {}, traceparent=parent, tracestate="vendor=x")
        plain = c.submit("report.export", {})
        w = Worker(proxy.url, wk, ["file.make", "report.export"], handler, lease_seconds=30, wait_seconds=1).start()
        self.addCleanup(w.stop)
        self.assertEqual(traced.wait(timeout=60).status, "succeeded")
        self.assertEqual(plain.wait(timeout=60).status, "succeeded")
        w.stop()
        tp, ts, tid = seen["file.make"]
        assert tp is not None and ts is not None
        self.assertRegex(tp, rf"^00-{trace}-[0-9a-f]{{16}}-01$")
        self.assertNotEqual(tp, parent, "the parent is acceptd's span of the attempt")
        self.assertRegex(ts, r"^acceptd=[0-9a-f]{16},vendor=x$")
        self.assertEqual(tid, trace)
        self.assertEqual(seen["report.export"], (None, None, None))
        calls = [r for r in proxy.log if r["path"].startswith(f"/v1/jobs/{traced.id}")]
        kinds = {(r["method"], r["path"][len(f"/v1/jobs/{traced.id}"):]) for r in calls}
        self.assertTrue({("POST", ":heartbeat"), ("PUT", "/result"), ("POST", ":complete")} <= kinds, kinds)
        for r in calls:
            self.assertEqual(r["headers"].get("traceparent"), tp, (r["method"], r["path"]))
        plain_calls = [r for r in proxy.log if r["path"].startswith(f"/v1/jobs/{plain.id}")]
        self.assertGreaterEqual(len(plain_calls), 2)
        self.assertTrue(all("traceparent" not in r["headers"] for r in plain_calls))


if __name__ == "__main__":
    unittest.main()
