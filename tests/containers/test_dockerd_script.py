"""scripts/dockerd.sh with KFP_GPU_DOCKERD_DATA_ROOT: what CI's warm runs rely on.

Two private engines are started here beside the one the other container tests use
(``KFP_GPU_DOCKERD_SHARED_HOST=1``: own bridge, iptables untouched), each stopped by its
pid. Needs root and Debian's docker.io, as ``scripts/dockerd.sh`` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.containers.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dockerd.sh"


@pytest.fixture()
def engines(tmp_path):
    """``start(env)`` -> (DOCKER_HOST, the engine's folder, stderr); all stopped at the end."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        unavailable("scripts/dockerd.sh needs root and dockerd (apt-get install docker.io)")
    started: list[str] = []

    def start(data_root: Path) -> tuple[str, str, str]:
        env = dict(os.environ, KFP_GPU_DOCKERD_SHARED_HOST="1",
                   KFP_GPU_DOCKERD_DATA_ROOT=str(data_root))
        r = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
        assert r.returncode == 0, r.stderr
        host = r.stdout.strip().removeprefix("export DOCKER_HOST=")
        folder = str(Path(host.removeprefix("unix://")).parent)
        started.append(folder)
        return host, folder, r.stderr

    yield start
    for folder in reversed(started):
        subprocess.run(["bash", str(SCRIPT), "stop", folder], capture_output=True, timeout=120,
                       check=False)


def docker(host: str, *args: str, cwd: Path | None = None) -> str:
    r = subprocess.run(["docker", *args], env=dict(os.environ, DOCKER_HOST=host,
                                                   DOCKER_BUILDKIT="0"),
                       cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_data_root_keeps_images_across_engines_and_serves_one_engine_at_a_time(engines,
                                                                              tmp_path):
    data = tmp_path / "data-root"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\nLABEL kfp-gpu-test=dockerd-script\n")

    host, folder, _ = engines(data)
    assert docker(host, "info", "--format", "{{.DockerRootDir}}").strip() == str(data)
    docker(host, "build", "-q", "-t", "kept:1", str(ctx))

    # a second engine on the same data-root while the first runs: its own folder instead
    host2, folder2, said = engines(data)
    assert f"in use by dockerd {(data / 'engine.pid').read_text().strip()}" in said
    assert docker(host2, "info", "--format", "{{.DockerRootDir}}").strip() == f"{folder2}/data"
    subprocess.run(["bash", str(SCRIPT), "stop", folder2], check=True, capture_output=True)

    subprocess.run(["bash", str(SCRIPT), "stop", folder], check=True, capture_output=True)
    assert not Path(folder).exists() and data.is_dir()  # stop removes the folder, not the data

    host3, _, said = engines(data)
    assert f"data {data}" in said
    assert "kept:1" in docker(host3, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
