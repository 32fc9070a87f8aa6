"""Plumbing shared by the HTTP doubles: a JSON request handler and a loopback server."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler that answers JSON and keeps test output quiet."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def send_json(self, code: int, body: dict, headers: tuple = ()) -> None:
        """Answer ``code`` with ``body``; ``headers``: more ``(name, value)`` pairs."""
        data = json.dumps(body).encode()
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    """A threading HTTP(S) server with a free port, serving in a daemon thread.

    ``handler`` is a JsonHandler subclass; ``owner`` is set on it as attribute ``name``
    so the handler reaches the double's state (``self.kube``, ``self.kfp`` ...).
    ``bind`` is the address to listen on (default 127.0.0.1; ``0.0.0.0`` lets containers
    reach the double through their network's gateway). ``tls`` = ``(certfile, keyfile)``
    serves HTTPS, as a real API server does for in-cluster clients.
    """

    def __init__(self, handler: type, name: str, owner: object, *, bind: str = "127.0.0.1",
                 tls: tuple[str, str] | None = None) -> None:
        cls = type("Handler", (handler,), {name: owner})
        self.server = ThreadingHTTPServer((bind, 0), cls)
        self.server.daemon_threads = True
        self.scheme = "http"
        self.address = "127.0.0.1" if bind in ("", "0.0.0.0") else bind
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
