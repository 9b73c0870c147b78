"""Batches and schedules against the real daemon (docs/protocol.md; CONTRACT sections 12 and 13): a batch
followed over its event stream (resumed with Last-Event-ID after a cut) and, behind a proxy that refuses event
streams, by polling with If-None-Match at the Retry-After pace; its jobs paged; a batch cancelled; a refused
batch's typed problem; a schedule created, read, listed, patched, triggered and deleted."""

from __future__ import annotations

import threading
import unittest
from typing import Any

from acceptd import Batch, Client, JobContext, ProblemError, Worker

from .harness import Daemon, Proxy

d: Daemon


def setUpModule() -> None:
    global d
    d = Daemon().start()


def tearDownModule() -> None:
    d.stop()


class BatchTest(unittest.TestCase):
    def _worker(self, wk: str, job_type: str, gate: threading.Event) -> Worker:
        def handler(ctx: JobContext) -> Any:
            gate.wait(30)
            return {"n": ctx.payload["n"]}

        w = Worker(d.url, wk, [job_type], handler, concurrency=2, wait_seconds=1).start()
        self.addCleanup(w.stop)
        return w

    def test_follows_a_batch_over_events_with_resume_and_pages_its_jobs(self) -> None:
        ck, wk, _ = d.tenant()
        cuts = [0]

        def decide(method: str, path: str, headers: dict[str, str]) -> Any:
            if path.endswith("/events") and cuts[0] == 0:
                cuts[0] += 1
                return "cut-after-event"
            return None

        proxy = Proxy(d.url, decide)
        self.addCleanup(proxy.close)
        c = Client(proxy.url, ck)
        self.addCleanup(c.close)
        batch = c.submit_batch([{"type": "work.item", "payload": {"n": n}} for n in (1, 2, 3)])
        self.assertTrue(batch.id.startswith("bat_"))
        self.assertEqual((batch.status, batch.data["total"]), ("running", 3))
        gate = threading.Event()
        self._worker(wk, "work.item", gate)
        seen: list[dict[str, int]] = []
        threading.Timer(0.3, gate.set).start()
        batch.wait(timeout=60, on_progress=lambda b: seen.append(b.counts))
        self.assertEqual(batch.followed_by, "events")
        self.assertEqual(batch.status, "succeeded")
        self.assertEqual(batch.counts, {"queued": 0, "running": 0, "succeeded": 3, "partialSuccess": 0,
                                        "failed": 0, "cancelled": 0})
        self.assertEqual(seen[-1]["succeeded"], 3)
        streams = [r for r in proxy.log if r["path"].endswith("/events")]
        self.assertGreaterEqual(len(streams), 2, "the cut stream was opened again")
        self.assertNotIn("last-event-id", streams[0]["headers"])
        self.assertRegex(streams[1]["headers"].get("last-event-id", ""), r"^\d+$")
        direct = Client(d.url, ck)
        self.addCleanup(direct.close)
        jobs = sorted((j.data["payload"]["n"], j.data["batchId"], j.status)
                      for j in direct.batch(batch.id).jobs(page_size=2))
        self.assertEqual(jobs, [(n, batch.id, "succeeded") for n in (1, 2, 3)])

    def test_polls_at_the_retry_after_pace_when_events_are_refused(self) -> None:
        ck, wk, _ = d.tenant()
        proxy = Proxy(d.url, lambda m, p, h: ("refuse", 502) if p.endswith("/events") else None)
        self.addCleanup(proxy.close)
        c = Client(proxy.url, ck)
        self.addCleanup(c.close)
        batch = c.submit_batch([{"type": "report.export", "payload": {"n": 1}}])
        gate = threading.Event()
        self._worker(wk, "report.export", gate)
        threading.Timer(2.5, gate.set).start()
        batch.wait(timeout=60)
        self.assertEqual((batch.followed_by, batch.status), ("poll", "succeeded"))
        polls = [r for r in proxy.log if r["method"] == "GET" and r["path"] == f"/v1/batches/{batch.id}"]
        self.assertGreaterEqual(len(polls), 2)
        self.assertTrue(all("if-none-match" in r["headers"] for r in polls[1:]), "each later poll sends the ETag")
        gaps = [b["at"] - a["at"] for a, b in zip(polls, polls[1:])]
        self.assertTrue(all(g >= 0.95 for g in gaps), gaps)

    def test_cancel_and_a_refused_batch(self) -> None:
        ck, _, _ = d.tenant()
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        batch = c.submit_batch([{"type": "report.export", "payload": {}}] * 2)
        batch.cancel()
        self.assertEqual((batch.status, batch.counts["cancelled"]), ("cancelled", 2))
        self.assertIsInstance(c.batch(batch.id).wait(timeout=10), Batch)
        with self.assertRaises(ProblemError) as bad:
            c.submit_batch([{"type": "report.export", "payload": {}}, {"type": "no.such.type", "payload": {}}])
        self.assertEqual(bad.exception.status, 422)
        self.assertTrue(any(e["pointer"].startswith("/jobs/1") for e in bad.exception.errors), bad.exception.errors)
        with self.assertRaises(ProblemError) as cb:  # the callbackUrl goes with it: a loopback one is refused
            c.submit_batch([{"type": "report.export", "payload": {}}], callback_url="http://127.0.0.1:9/hook")
        self.assertEqual([e["pointer"] for e in cb.exception.errors], ["/callbackUrl"])


class ScheduleTest(unittest.TestCase):
    def test_create_get_list_update_trigger_delete(self) -> None:
        ck, _, _ = d.tenant()
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        s = c.schedules.create({"type": "report.export", "payload": {"month": "last"}}, id="nightly",
                               cron="0 3 * * *", timezone="Europe/Berlin")
        self.assertEqual((s["id"], len(s["upcoming"])), ("nightly", 5))
        self.assertEqual(c.schedules.get("nightly")["cron"], "0 3 * * *")
        c.schedules.create({"type": "report.export", "payload": {}}, id="often", every="1h", catchup_window="5m")
        self.assertEqual(sorted(x["id"] for x in c.schedules.list(page_size=1)), ["nightly", "often"])
        self.assertEqual(c.schedules.get("often")["catchupWindow"], "5m")
        p = c.schedules.update("nightly", {"paused": True, "timezone": None})
        self.assertEqual((p["paused"], p["timezone"]), (True, "UTC"))
        run = c.schedules.trigger("often")
        self.assertEqual(len(run["recentRuns"]), 1)
        self.assertEqual(c.get(run["recentRuns"][0]["jobId"]).data["schedule"]["id"], "often")
        c.schedules.delete("often")
        with self.assertRaises(ProblemError) as gone:
            c.schedules.get("often")
        self.assertEqual(gone.exception.status, 404)
        with self.assertRaises(ProblemError) as dup:
            c.schedules.create({"type": "report.export", "payload": {}}, id="nightly", every="5m")
        self.assertEqual(dup.exception.status, 409)


if __name__ == "__main__":
    unittest.main()
