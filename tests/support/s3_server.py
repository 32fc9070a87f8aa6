"""A real local S3 server (moto's server mode, PyPI ``moto[server]``) for s3:// tests.

``moto.server.ThreadedMotoServer`` serves the S3 REST API over HTTP on loopback; clients
reach it the way they reach MinIO or SeaweedFS: through ``AWS_ENDPOINT_URL`` and the AWS
credential variables, which :func:`running` sets meanwhile (and restores afterwards).
"""

from __future__ import annotations

import contextlib
import os
import socket

#: What :func:`running` sets; the endpoint variable is added with the server's address.
TEST_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1"}
#: Variables that would point the client elsewhere; unset meanwhile.
CLEARED = ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def patched_env(values: dict[str, str | None]):
    """Set (value) or unset (None) environment variables, restored on exit."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def running(bucket: str = "kfp-gpu-test", *, endpoint_var: str = "AWS_ENDPOINT_URL"):
    """Start moto's S3 server on 127.0.0.1 with an empty ``bucket``; yields
    ``(bucket, endpoint URL)`` with ``endpoint_var`` pointing at it."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**TEST_ENV, **dict.fromkeys(CLEARED), "AWS_ENDPOINT_URL": None, endpoint_var: endpoint}
    try:
        with patched_env(env):
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
            yield bucket, endpoint
    finally:
        server.stop()
