"""A real local GCS server (the PyPI gcp-storage-emulator) for gs:// tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(bucket: str = "kfp-gpu-test"):
    """Start the emulator in memory with ``bucket``; sets STORAGE_EMULATOR_HOST meanwhile."""
    port = _free_port()
    exe = Path(sys.executable).with_name("gcp-storage-emulator")
    proc = subprocess.Popen([str(exe), "start", "--host", "127.0.0.1", "--port", str(port),
                             "--in-memory", "--default-bucket", bucket, "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    old = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 20
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("gcp-storage-emulator did not start")
            time.sleep(0.1)
        yield bucket
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # e.g. SIGTERM ignored by the parent's parent
            proc.kill()
            proc.wait(timeout=10)
        if old is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = old
