"""A ResourceClaimTemplate create that times out on the client's side: a fault the launcher
must survive without orphaning its job (against the API double in
tests/unit/test_launcher_dra_orphans.py, against the real API server in
tests/cluster/test_dra.py)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

from kfp_gpu.mpi.launch import jobs_api


class BlackHole:
    """A TCP port that takes connections and never answers: a request sent there ends in
    urllib3's ``ReadTimeoutError`` after the client's read timeout (the kernel completes
    the handshake for the listen backlog; nothing is ever read or written)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.host = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def template_creates_time_out(read_timeout_s: float = 0.2) -> Iterator[list]:
    """Every POST of a ResourceClaimTemplate goes to a :class:`BlackHole` with a
    ``read_timeout_s`` read timeout (a deliberate client timeout); every other request goes
    where it went. The template is never created. Yields the list of POSTs sent there."""
    from kubernetes import client

    hole = BlackHole()
    cfg = client.Configuration()
    cfg.host = hole.host
    silent = client.CustomObjectsApi(client.ApiClient(cfg))
    real = jobs_api.MPIJobClient._call
    sent: list = []

    def create(*args, **kwargs):
        sent.append(args)
        return silent.create_namespaced_custom_object(*args, **kwargs)

    def call(self, what, fn, *args, **kwargs):
        if what == "create resourceclaimtemplate":
            fn, kwargs["_request_timeout"] = create, (5, read_timeout_s)
        return real(self, what, fn, *args, **kwargs)

    jobs_api.MPIJobClient._call = call
    try:
        yield sent
    finally:
        jobs_api.MPIJobClient._call = real
        hole.close()
