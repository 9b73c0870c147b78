"""What the library's tests share: the real acceptd binary started on an ephemeral loopback port with a
throwaway data directory and a configuration of keys (as tests/blackbox/lib/daemon.mjs does), a small HTTP
proxy that forwards to it (streaming answers as they come) and can refuse or break chosen requests, and a
webhook receiver. Loopback only. ACCEPTD_BIN names the binary (default: build/acceptd of the checkout)."""

from __future__ import annotations

import http.client
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.abspath(os.environ.get("ACCEPTD_BIN") or os.path.join(REPO, "build", "acceptd"))
LISTENING = re.compile(r"acceptd: listening on (https?://\S+)")
TENANTS = 16


def config(extra: str = "") -> str:
    """Keys ck-i (client), wk-i (worker), ak-i (admin) of tenants t1..t16, a few types, short timings."""
    keys = []
    for i in range(1, TENANTS + 1):
        keys += [f'  - {{ key: "ck-{i}", tenant: t{i}, role: client }}',
                 f'  - {{ key: "wk-{i}", tenant: t{i}, role: worker }}',
                 f'  - {{ key: "ak-{i}", tenant: t{i}, role: admin }}']
    return ("keys:\n" + "\n".join(keys) + "\n"
            "types:\n  report.export: {}\n  video.transcode: { required: [sourceUrl], maxAttempts: 3 }\n"
            "  work.item: { maxAttempts: 3 }\n  file.make: {}\n"
            "limits: { maxWaitSeconds: 5 }\n" + extra)


class Daemon:
    """The acceptd binary, started by start() and stopped by stop() (SIGTERM, then SIGKILL)."""

    def __init__(self, extra_config: str = "") -> None:
        self.tmp = tempfile.mkdtemp(prefix="acceptd-py-")
        self.config_file = os.path.join(self.tmp, "acceptd.yaml")
        with open(self.config_file, "w") as f:
            f.write(config(extra_config))
        self.data = os.path.join(self.tmp, "data")
        os.mkdir(self.data)
        self.stderr_path = os.path.join(self.tmp, "stderr.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._next_tenant = 0

    def start(self) -> "Daemon":
        if not os.path.exists(BIN):
            raise RuntimeError(f"acceptd binary not found at {BIN}: build it or set ACCEPTD_BIN")
        args = [BIN, "serve", "--listen", "127.0.0.1:0", "--data", self.data, "--config", self.config_file]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        found = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:  # keep draining, so that the daemon never blocks on a full pipe
                m = LISTENING.search(raw.decode("utf-8", "replace"))
                if m and not found.is_set():
                    self.url = m.group(1).rstrip("/")
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(15):
            self.stop()
            raise RuntimeError(f"acceptd did not report listening:\n{self.stderr()}")
        return self

    def stderr(self) -> str:
        with open(self.stderr_path, "rb") as f:
            return f.read()[-8000:].decode("utf-8", "replace")

    def tenant(self) -> tuple[str, str, str]:
        """(client key, worker key, admin key) of a tenant no other test of this daemon has used."""
        self._next_tenant += 1
        i = self._next_tenant
        assert i <= TENANTS, "more tenants than the configuration declares"
        return f"ck-{i}", f"wk-{i}", f"ak-{i}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if not os.environ.get("ACCEPTD_KEEP_TMP"):
            shutil.rmtree(self.tmp, ignore_errors=True)


_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class Proxy:
    """An HTTP/1.1 proxy on 127.0.0.1 in front of the daemon. Every request is recorded in `log` as a dict
    (at, method, path, headers, status, answer_headers). decide(method, path, headers) may answer:
    None (forward), ("refuse", status) (answer that status without forwarding), "drop-answer" (forward,
    then close the connection without answering) "corrupt" (forward, with the first byte of the answer's
    body changed), "cut-after-event" (forward an event stream up to its first whole event, then drop the
    connection), ("cut-after", N) (forward the first N bytes of the answer's body, then drop the
    connection) or ("cut-request-after", N) (forward the request with only the first N bytes of its body, then
    drop both connections: the daemon sees a body cut short)."""

    def __init__(self, upstream: str, decide: Callable[[str, str, dict[str, str]], Any] | None = None) -> None:
        m = re.match(r"http://([^:/]+):(\d+)", upstream)
        assert m, upstream
        self.host, self.port = m.group(1), int(m.group(2))
        self.decide = decide or (lambda method, path, headers: None)
        self.log: list[dict[str, Any]] = []
        proxy = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                rec: dict[str, Any] = {"at": time.monotonic(), "method": self.command, "path": self.path,
                                       "headers": headers, "status": None, "answer_headers": {}}
                proxy.log.append(rec)
                d = proxy.decide(self.command, self.path, headers)
                if isinstance(d, tuple) and d[0] == "refuse":
                    rec["status"] = d[1]
                    msg = b"refused by the test proxy\n"
                    self.send_response(d[1])
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(msg)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(msg)
                    self.close_connection = True
                    return
                up = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                fwd = {k: v for k, v in self.headers.items() if k.lower() not in _HOP and k.lower() != "host"}
                if isinstance(d, tuple) and d[0] == "cut-request-after" and body is not None:
                    up.request(self.command, self.path, body=body[:d[1]], headers=fwd)  # its Content-Length: all
                    rec["cut"] = True
                    up.close()
                    self.close_connection = True
                    return
                up.request(self.command, self.path, body=body, headers=fwd)
                res = up.getresponse()
                rec["status"] = res.status
                rec["answer_headers"] = {k.lower(): v for k, v in res.getheaders()}
                if d == "drop-answer":
                    res.read()
                    up.close()
                    self.close_connection = True
                    return
                self.send_response(res.status)
                for k, v in res.getheaders():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                self.send_header("Connection", "close")
                length = res.getheader("Content-Length")
                chunked = length is None and self.command != "HEAD" and res.status not in (204, 304)
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                seen = b""
                left = d[1] if isinstance(d, tuple) and d[0] == "cut-after" else -1
                try:
                    flip = d == "corrupt"
                    while self.command != "HEAD":
                        chunk = res.read1(65536)
                        if not chunk:
                            break
                        if flip:
                            chunk, flip = bytes([chunk[0] ^ 1]) + chunk[1:], False
                        if left >= 0:
                            chunk = chunk[:left]
                            left -= len(chunk)
                        if chunked:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        else:
                            self.wfile.write(chunk)
                        self.wfile.flush()
                        if left == 0:
                            rec["cut"] = True
                            up.close()
                            self.close_connection = True
                            return
                        if d == "cut-after-event":
                            seen += chunk
                        if d == "cut-after-event" and re.search(rb"(^|\n)id:[^\n]*\n(.*\n)*?\n", seen):
                            rec["cut"] = True
                            up.close()
                            self.close_connection = True
                            return
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                up.close()
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Receiver:
    """A webhook receiver on 127.0.0.1: records (headers, body) of every POST and answers 204."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.cond = threading.Condition()
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with rec.cond:
                    rec.deliveries.append(({k: v for k, v in self.headers.items()}, body))
                    rec.cond.notify_all()
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, pred: Callable[[list[tuple[dict[str, str], bytes]]], bool], timeout: float = 30) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: pred(self.deliveries), timeout):
                raise AssertionError(f"no matching delivery within {timeout}s: {self.deliveries!r}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def eprint(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)
