"""Result artifacts against the real daemon: 64 MiB uploaded in parts by a Worker handler and downloaded
with its digest checked, through a proxy that cuts the download twice (it resumes with Range requests); an
upload whose part's answer is lost, or whose part is cut short, resumes from the daemon's offset."""

from __future__ import annotations

import base64
import hashlib
import os
import unittest
from typing import Any

from acceptd import Artifact, Client, DigestMismatch, JobContext, Worker

from .harness import Daemon, Proxy

d: Daemon


def setUpModule() -> None:
    global d
    d = Daemon().start()


def tearDownModule() -> None:
    d.stop()


def digest(b: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(b).digest()).decode() + ":"


class ArtifactTest(unittest.TestCase):
    def test_64_mib_up_and_down(self) -> None:
        ck, wk, _ = d.tenant()
        data = os.urandom(64 << 20)
        answers: list[dict[str, Any]] = []

        def handler(ctx: JobContext) -> None:
            answers.append(ctx.upload_artifact(data, "application/x-test"))

        proxy = Proxy(d.url)
        self.addCleanup(proxy.close)
        w = Worker(proxy.url, wk, ["file.make"], handler, concurrency=1, wait_seconds=1).start()
        self.addCleanup(w.stop)
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        job = c.submit("file.make", {}).wait(timeout=300)
        self.assertEqual(job.status, "succeeded", job.data)
        self.assertEqual(answers[0]["digest"], digest(data))
        self.assertEqual(job.data["artifact"]["size"], len(data))
        puts = [r for r in proxy.log if r["method"] == "PUT"]
        self.assertEqual(len(puts), 16, "64 MiB in 4 MiB parts")
        self.assertEqual([r["status"] for r in puts], [204] * 15 + [200])
        cuts = [10 << 20, 20 << 20]

        def cut(method: str, path: str, headers: dict[str, str]) -> object:
            return ("cut-after", cuts.pop(0)) if method == "GET" and path.endswith("/result") and cuts else None

        down = Proxy(d.url, cut)
        self.addCleanup(down.close)
        cd = Client(down.url, ck)
        self.addCleanup(cd.close)
        with cd.result(job.id) as art:
            self.assertIsInstance(art, Artifact)
            self.assertEqual((art.size, art.content_type, art.digest), (len(data), "application/x-test", digest(data)))
            got = hashlib.sha256()
            n = 0
            for chunk in art:
                got.update(chunk)
                n += len(chunk)
        self.assertEqual((n, got.hexdigest()), (len(data), hashlib.sha256(data).hexdigest()))
        self.assertEqual(art.resumed, 2)
        gets = [r["headers"] for r in down.log if r["method"] == "GET"]
        self.assertEqual([(h.get("range"), h.get("if-range")) for h in gets],
                         [(None, None), (f"bytes={10 << 20}-", art.etag), (f"bytes={30 << 20}-", art.etag)])

    def test_upload_resumes_after_a_lost_answer_and_a_cut_part(self) -> None:
        ck, wk, _ = d.tenant()
        data = os.urandom(3 << 20)
        puts = 0

        def decide(method: str, path: str, headers: dict[str, str]) -> object:
            nonlocal puts
            if method == "PUT":
                puts += 1
                if puts == 2:
                    return "drop-answer"  # the daemon stores the second part; the worker never hears so
                if puts == 3:
                    return ("cut-request-after", 300_000)  # the third part is cut short on its way
            return None

        proxy = Proxy(d.url, decide)
        self.addCleanup(proxy.close)
        w = Worker(proxy.url, wk, ["file.make"], lambda ctx: ctx.upload_artifact(data, part_bytes=1 << 20) and None,
                   concurrency=1, wait_seconds=1).start()
        self.addCleanup(w.stop)
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        job = c.submit("file.make", {}).wait(timeout=120)
        self.assertEqual(job.status, "succeeded", job.data)
        self.assertEqual(job.data["artifact"]["digest"], digest(data))
        log = [(r["method"], r["headers"].get("upload-offset"), r["status"]) for r in proxy.log
               if r["method"] in ("PUT", "HEAD")]
        # Part 2's answer was lost; HEAD showed it stored, so part 3 followed at 2 MiB: not sent twice. Part 3
        # was cut short; HEAD showed the daemon still at 2 MiB, so part 3 went again, whole.
        self.assertEqual(log, [("PUT", None, 204), ("PUT", str(1 << 20), 204), ("HEAD", None, 204),
                               ("PUT", str(2 << 20), None), ("HEAD", None, 204), ("PUT", str(2 << 20), 200)], log)
        art = c.result(job.id)
        self.assertIsInstance(art, Artifact)
        with art:
            self.assertEqual(art.read(), data)
        # A byte changed on the way down: the stream refuses it at its end.
        bad = Proxy(d.url, lambda m, p, h: "corrupt" if p.endswith("/result") and m == "GET" else None)
        self.addCleanup(bad.close)
        cb = Client(bad.url, ck)
        self.addCleanup(cb.close)
        with cb.result(job.id) as art2, self.assertRaises(DigestMismatch):
            for _ in art2:
                pass


if __name__ == "__main__":
    unittest.main()
