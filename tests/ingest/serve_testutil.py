"""Helpers for end-to-end tests of ``ragpulse serve``: a real subprocess, a cuttable TCP proxy, DB queries."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg

REPO = Path(__file__).resolve().parents[2]


class ServeProcess:
    """``python -m ragpulse serve`` with the given ``RAGPULSE_*`` environment (none inherited, nor ``OTEL_*`` /
    ``OPENAI_*``); JSON log lines are collected in :attr:`logs`. The one serve starter of the tests
    (``portal_testutil.Portal`` adds the portal's address and client)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))
        }
        # no portal listener unless the test asks for one: its fixed default port (127.0.0.1:9470) would collide
        # between serve processes of concurrent test runs
        self.env["RAGPULSE_API_ADDRESS"] = ""
        self.env.update(env)
        self.env["PYTHONPATH"] = str(REPO / "src")
        self.env["RAGPULSE_LOG_JSON"] = "true"
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[dict[str, Any]] = []
        self._reader: threading.Thread | None = None

    def start(self, wait_ready_s: float = 60.0) -> None:
        self.logs = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragpulse", "serve"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + wait_ready_s
        while not self.events("ready"):
            if self.proc.poll() is not None:
                self._reader.join(5)  # collect the rest of its output
                raise RuntimeError(f"ragpulse serve exited with {self.proc.returncode}: {self.logs[-5:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ragpulse serve not ready after {wait_ready_s}s: {self.logs[-5:]}")
            time.sleep(0.05)

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").strip()
            try:
                self.logs.append(json.loads(line))
            except ValueError:
                self.logs.append({"event": "_raw", "line": line})

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.logs if e.get("event") == name]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, wait for the exit (at most ``timeout`` s) and for the last log lines; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(10)  # its stderr is at EOF: every line it wrote is in :attr:`logs`
        return rc

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class TcpProxy:
    """A TCP forwarder on 127.0.0.1 that a test can cut (close every connection, refuse new ones) and restore.

    ``target``: ``(host, port)``, or the path of a unix socket (``testsupport.pg_server`` gives either for a
    database URL)."""

    def __init__(self, target: tuple[str, int] | str) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._down = False
        self._flowing = threading.Event()  # cleared by freeze(): nothing moves, nothing is closed
        self._flowing.set()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._flowing.wait()  # a frozen network: the connection attempt hangs until restore()
            if self._down:
                client.close()
                continue
            try:
                upstream = self._connect()
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _connect(self) -> socket.socket:
        if isinstance(self._target, str):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(5)
            try:
                conn.connect(self._target)
            except OSError:
                conn.close()
                raise
            return conn
        return socket.create_connection(self._target, timeout=5)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                self._flowing.wait()
                data = src.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def cut(self) -> None:
        """Drop every open connection and refuse new ones until :meth:`restore`."""
        self._down = True
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def freeze(self) -> None:
        """Stop moving bytes without closing anything (a network partition, a stopped server host): queries
        in flight hang, new connections wait; :meth:`cut` then drops them, :meth:`restore` lets them go on."""
        self._flowing.clear()

    def restore(self) -> None:
        self._down = False
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self.cut()
        self._listener.close()


async def db_counts(url: str) -> dict[str, Any]:
    """Traces, judgements and per-trace judgement counts in the store's database."""
    conn = await asyncpg.connect(url)
    try:
        traces = await conn.fetchval("SELECT count(*) FROM traces")
        judgements = await conn.fetchval("SELECT count(*) FROM judgements")
        per_trace = await conn.fetch("SELECT trace_id, count(*) AS n FROM judgements GROUP BY trace_id")
        return {
            "traces": traces,
            "judgements": judgements,
            "per_trace": {r["trace_id"]: r["n"] for r in per_trace},
        }
    finally:
        await conn.close()
