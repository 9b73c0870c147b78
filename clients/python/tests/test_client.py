"""Client and Job against the real daemon: submit, wait over SSE and by polling, list, cancel, retry,
results, and problems raised as typed errors."""

from __future__ import annotations

import re
import threading
import time
import unittest
from typing import Any, Callable

from acceptd import Client, JobTimeout, ProblemError
from acceptd._http import Transport

from .harness import Daemon, Proxy

d: Daemon


def setUpModule() -> None:
    global d
    d = Daemon().start()


def tearDownModule() -> None:
    d.stop()


def run_one(url: str, wkey: str, type: str, result: object, steps: int = 0) -> None:
    """A hand-made worker: lease one job of type, report `steps` progress heartbeats, complete it."""
    t = Transport(url, wkey)
    res = t.request("POST", "/v1/leases", body={"types": [type], "wait": 5, "leaseSeconds": 30})
    assert res.status == 200, res.status
    lease = res.json()["leases"][0]
    path = f"/v1/jobs/{lease['job']['id']}"
    for i in range(steps):
        t.request("POST", path + ":heartbeat", body={"leaseId": lease["leaseId"], "progress": 30 * (i + 1),
                                                     "message": f"step {i + 1}"})
    t.request("POST", path + ":complete", body={"leaseId": lease["leaseId"], "result": result})
    t.close()


class ClientTest(unittest.TestCase):
    def client(self, url: str, key: str) -> Client:
        c = Client(url, key)
        self.addCleanup(c.close)
        return c

    def test_submit_and_wait_over_sse(self) -> None:
        ck, wk, _ = d.tenant()
        proxy = Proxy(d.url)  # forwards everything: it only shows which requests the client made
        self.addCleanup(proxy.close)
        c = self.client(proxy.url, ck)
        job = c.submit("report.export", {"month": "2026-11"}, priority="high", max_attempts=2)
        self.assertEqual(job.status, "queued")
        self.assertEqual(job.data["priority"], "high")
        self.assertEqual(job.data["maxAttempts"], 2)
        seen: list[tuple[str, int | None, str | None]] = []
        threading.Timer(0.3, run_one, (d.url, wk, "report.export", {"rows": 7}, 2)).start()
        job.wait(timeout=30, on_progress=lambda j: seen.append((j.status, j.progress, j.message)))
        self.assertEqual(job.status, "succeeded")
        self.assertEqual(job.result(), {"rows": 7})
        self.assertIn(("running", 60, "step 2"), seen, seen)
        self.assertEqual(seen[-1][0], "succeeded")
        events = [r for r in proxy.log if r["path"].endswith("/events")]
        self.assertTrue(events and events[0]["status"] == 200, proxy.log)
        polls = [r for r in proxy.log if r["method"] == "GET" and r["path"] == f"/v1/jobs/{job.id}"]
        self.assertEqual(polls, [], "waited over SSE: no polls")

    def test_wait_resumes_a_dropped_stream_with_last_event_id(self) -> None:
        ck, wk, _ = d.tenant()
        n = 0

        def decide(method: str, path: str, headers: dict[str, str]) -> object:
            nonlocal n
            if path.endswith("/events"):
                n += 1
                return "cut-after-event" if n == 1 else None
            return None

        proxy = Proxy(d.url, decide)
        self.addCleanup(proxy.close)
        job = self.client(proxy.url, ck).submit("report.export", {})
        seen: list[tuple[str, int | None]] = []

        def work_after_the_cut() -> None:  # so that the first stream had only the `queued` event to give
            deadline = time.monotonic() + 60
            while not any(r.get("cut") for r in proxy.log) and time.monotonic() < deadline:
                time.sleep(0.02)
            run_one(d.url, wk, "report.export", "ok", 1)

        threading.Thread(target=work_after_the_cut, daemon=True).start()
        job.wait(timeout=30, on_progress=lambda j: seen.append((j.status, j.progress)))
        self.assertEqual(job.status, "succeeded")
        streams = [r for r in proxy.log if r["path"].endswith("/events")]
        self.assertGreaterEqual(len(streams), 2, proxy.log)
        self.assertTrue(streams[0].get("cut"))
        self.assertNotIn("last-event-id", streams[0]["headers"])
        self.assertRegex(streams[1]["headers"].get("last-event-id", ""), r"^[0-9]+$")
        self.assertEqual(seen, [("running", None), ("running", 30), ("succeeded", 100)], "each change once")

    def test_events_resume_after_an_id(self) -> None:
        ck, wk, _ = d.tenant()
        job = self.client(d.url, ck).submit("report.export", {})
        run_one(d.url, wk, "report.export", "ok", 1)
        all_events = list(job.events())
        self.assertEqual([e for _, e, _ in all_events], ["status", "status", "progress", "done"])
        self.assertEqual(job.status, "succeeded")
        rest = list(job.events(last_event_id=all_events[1][0]))
        self.assertEqual(rest, all_events[2:])
        self.assertEqual(list(job.events(last_event_id=all_events[-1][0])), [], "resumed past done: 204")

    def test_wait_polls_at_retry_after_pace_when_sse_is_refused(self) -> None:
        ck, wk, _ = d.tenant()

        def decide(method: str, path: str, headers: dict[str, str]) -> object:
            return ("refuse", 503) if path.endswith("/events") else None

        proxy = Proxy(d.url, decide)
        self.addCleanup(proxy.close)
        c = self.client(proxy.url, ck)
        job = c.submit("report.export", {})
        path = f"/v1/jobs/{job.id}"

        def polls() -> list[dict[str, Any]]:
            return [r for r in proxy.log if r["method"] == "GET" and r["path"] == path]

        def work_after_two_polls() -> None:
            deadline = time.monotonic() + 60
            while len(polls()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            run_one(d.url, wk, "report.export", "ok")

        threading.Thread(target=work_after_two_polls, daemon=True).start()
        job.wait(timeout=90)
        self.assertEqual(job.status, "succeeded")
        self.assertTrue(any(r["path"].endswith("/events") and r["status"] == 503 for r in proxy.log))
        p = polls()
        self.assertGreaterEqual(len(p), 3, p)
        self.assertTrue(all(r["headers"].get("if-none-match") for r in p), "every poll sends If-None-Match")
        self.assertIn(304, [r["status"] for r in p], "an unchanged job costs a 304")
        # Each poll waits at least what the answer before it said in Retry-After (the submit's for the first).
        prev_at = next(r["at"] for r in proxy.log if r["method"] == "POST")
        prev_ra = float(next(r for r in proxy.log if r["method"] == "POST")["answer_headers"]["retry-after"])
        for r in p:
            self.assertGreaterEqual(r["at"] - prev_at, prev_ra - 0.05, (r, prev_ra))
            prev_at = r["at"]
            ra = r["answer_headers"].get("retry-after")
            prev_ra = float(ra) if ra is not None else 0.0

    def test_wait_times_out(self) -> None:
        ck, _, _ = d.tenant()
        for events in (True, False):
            job = self.client(d.url, ck).submit("report.export", {})
            raised: list[BaseException] = []

            def wait() -> None:
                try:
                    job.wait(timeout=1.0, events=events)
                except BaseException as e:
                    raised.append(e)

            t = threading.Thread(target=wait, daemon=True)
            t.start()
            t.join(30)  # a wait that ignores its timeout fails here instead of hanging the suite
            self.assertFalse(t.is_alive(), f"wait(timeout=1) still waiting after 30 s (events={events})")
            self.assertEqual(len(raised), 1)
            self.assertIsInstance(raised[0], JobTimeout)
            self.assertEqual(getattr(raised[0], "job").status, "queued")

    def test_idempotency_key_by_default(self) -> None:
        ck, _, _ = d.tenant()
        c = self.client(d.url, ck)
        a = c.submit("report.export", {"n": 1}, idempotency_key="k-1")
        b = c.submit("report.export", {"n": 1}, idempotency_key="k-1")
        self.assertEqual(a.id, b.id)
        with self.assertRaises(ProblemError) as e:
            c.submit("report.export", {"n": 2}, idempotency_key="k-1")
        self.assertEqual(e.exception.code, "idempotency-key-reused")
        # Without a key of the caller's, each submit gets a fresh one: two submits, two jobs.
        proxy = Proxy(d.url)
        self.addCleanup(proxy.close)
        c2 = self.client(proxy.url, ck)
        x, y = c2.submit("report.export", {"n": 3}), c2.submit("report.export", {"n": 3})
        self.assertNotEqual(x.id, y.id)
        keys = [r["headers"].get("idempotency-key") for r in proxy.log]
        self.assertTrue(all(keys) and len(set(keys)) == 2, keys)

    def test_list_follows_pages_get_cancel_retry(self) -> None:
        ck, _, _ = d.tenant()
        c = self.client(d.url, ck)
        ids = [c.submit("report.export", {"i": i}).id for i in range(7)]
        listed = [j.id for j in c.list(type="report.export", page_size=3)]
        self.assertEqual(listed, list(reversed(ids)))  # newest first, across three pages
        self.assertEqual([j.id for j in c.list(status="cancelled")], [])
        job = c.cancel(ids[0])
        self.assertEqual(job.status, "cancelled")
        self.assertEqual(c.get(ids[0]).status, "cancelled")
        again = job.retry()
        self.assertEqual(again.data["retryOf"], ids[0])
        self.assertEqual(again.status, "queued")
        self.assertEqual(c.get(ids[1]).cancel().status, "cancelled")

    def test_problems_are_typed(self) -> None:
        ck, wk, _ = d.tenant()
        c = self.client(d.url, ck)
        cases: list[tuple[Callable[[], object], int, str]] = [
            (lambda: c.submit("no.such.type", {}), 422, "unknown-type"),
            (lambda: c.get("job_doesnotexist"), 404, "not-found"),
            (lambda: self.client(d.url, "wrong-key").get("job_x"), 401, "unauthorized"),
            (lambda: self.client(d.url, wk).submit("report.export", {}), 403, "forbidden"),
        ]
        for call, status, code in cases:
            with self.assertRaises(ProblemError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (status, code), e.exception.problem)
            self.assertEqual(e.exception.type, f"https://acceptd.dev/problems/{code}")
            self.assertTrue(e.exception.title)
        with self.assertRaises(ProblemError) as e:
            c.submit("video.transcode", {}, max_attempts=1000)
        p = e.exception
        self.assertEqual((p.status, p.code), (422, "validation-failed"))
        self.assertEqual(sorted(x["pointer"] for x in p.errors), ["/maxAttempts", "/payload/sourceUrl"], p.errors)
        job = c.submit("report.export", {})
        with self.assertRaises(ProblemError) as e:
            job.result()
        self.assertEqual(e.exception.code, "result-not-ready")
        self.assertIsNotNone(e.exception.retry_after)
        job.cancel()
        with self.assertRaises(ProblemError) as e:
            job.cancel()
        self.assertEqual((e.exception.status, e.exception.code), (409, "illegal-transition"))
        with self.assertRaises(ProblemError) as e:
            job.result()
        self.assertEqual(e.exception.code, "job-cancelled")
        self.assertTrue(re.match(r"^409 job-cancelled", str(e.exception)))


if __name__ == "__main__":
    unittest.main()
