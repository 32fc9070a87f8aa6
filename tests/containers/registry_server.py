"""The test registry: Debian's ``docker-registry`` (the CNCF distribution registry, 2.8)
on a free loopback port, and the three built images pushed to it; fixtures ``registry``
and ``pushed`` (imported by tests/conftest.py, one of each per session).

Its storage persists between runs on one machine (``~/.cache/kfp-gpu/registry``, like the
engine's layers and the Go and pip caches; emptied above :data:`STORAGE_LIMIT_BYTES`): a
push still runs the whole protocol (blob HEADs, the manifest PUT that yields the digest),
but the layers a warm machine already pushed are answered "Layer already exists" instead of
being compressed and uploaded again (5 GB, about 4 minutes of CI on 2 cores).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

import kfp_gpu
from tests.containers.conftest import unavailable
from tests.containers.engine import NAMES

VERSION = kfp_gpu.__version__
#: A tag :func:`pushed` makes for the test registry on a loopback port.
LEFT_TAG = re.compile(r"^127\.0\.0\.1:\d+/kfp-gpu-[a-z]+:")


#: Where the registry keeps its blobs between runs, and the size above which it is emptied
#: before a run (old layers of earlier builds are never read again).
STORAGE = Path.home() / ".cache" / "kfp-gpu" / "registry"
STORAGE_LIMIT_BYTES = 20 * 2**30


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """``127.0.0.1:<port>``: a distribution registry serving until the module ends."""
    exe = shutil.which("docker-registry")
    if not exe:
        unavailable("docker-registry is not installed (apt-get install docker-registry)")
    work = tmp_path_factory.mktemp("registry")
    if STORAGE.exists() and _size(STORAGE) > STORAGE_LIMIT_BYTES:
        shutil.rmtree(STORAGE)
    STORAGE.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    config = work / "config.yml"
    # distribution docs/configuration.md: storage.filesystem.rootdirectory, http.addr
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(STORAGE)}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    log = (work / "registry.log").open("wb")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    host = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"http://{host}/v2/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not start: {(work / 'registry.log').read_text()}")
            time.sleep(0.2)
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def pushed(registry, image, docker_client) -> dict[str, str]:
    """The three CPU images pushed to ``registry``: name -> the digest ``docker push``
    reported. The tags made here are removed at the end (the images keep their own), and
    first those a killed session left (``127.0.0.1:<its port>/kfp-gpu-<name>``: that end
    never came, and the engine's data root outlives the session)."""
    import docker
    made = []
    out = {}
    try:
        for name in NAMES:
            local = docker_client.images.get(image(name))
            for stale in [t for t in local.tags if LEFT_TAG.match(t)]:
                docker_client.images.remove(stale)  # untag only
            repo = f"{registry}/kfp-gpu-{name}"
            local.tag(repo, tag=VERSION)
            made.append(f"{repo}:{VERSION}")
            events = list(docker_client.images.push(repo, tag=VERSION, stream=True, decode=True))
            errors = [e for e in events if "error" in e or "errorDetail" in e]
            assert not errors, errors
            found = [e["aux"]["Digest"] for e in events if "Digest" in e.get("aux", {})]
            assert len(found) == 1, events[-5:]
            out[name] = found[0]
        yield out
    finally:
        for ref in made:
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(ref)  # untag only: the image keeps its own tag


