"""Plumbing shared by the HTTP doubles: a JSON request handler and a loopback server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler that answers JSON and keeps test output quiet."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def send_json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    """A threading HTTP server on 127.0.0.1 with a free port, serving in a daemon thread.

    ``handler`` is a JsonHandler subclass; ``owner`` is set on it as attribute ``name``
    so the handler reaches the double's state (``self.kube``, ``self.kfp`` ...).
    """

    def __init__(self, handler: type, name: str, owner: object) -> None:
        cls = type("Handler", (handler,), {name: owner})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), cls)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
