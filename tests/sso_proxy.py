"""A single-sign-on proxy as docs/portal.md describes it, in front of a started ``ragpulse serve``: it forwards
every request with ``Authorization: Bearer <token>`` added and ``X-Forwarded-For`` extended by its peer (as
NGINX's ``$proxy_add_x_forwarded_for``), keeps ``Host`` (``proxy_set_header Host $host``) and passes the answer
back unchanged (no redirect followed). A real HTTP server on 127.0.0.1 in a thread."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}


class SsoProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``, injecting ``token``; an ordinary context manager."""

    def __init__(self, target_port: int, token: str) -> None:
        target = target_port
        bearer = f"Bearer {token}"
        #: Every forwarded request's ``X-Forwarded-For`` as sent upstream.
        self.forwarded_for: list[str] = []
        seen = self.forwarded_for

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                prior = self.headers.get("x-forwarded-for")
                xff = f"{prior}, {self.client_address[0]}" if prior else self.client_address[0]
                headers["X-Forwarded-For"] = xff
                headers["Authorization"] = bearer
                seen.append(xff)
                conn = http.client.HTTPConnection("127.0.0.1", target, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SsoProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
