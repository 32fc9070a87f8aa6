"""The distribution builds cleanly: ``python -m build`` (pypa/build, dev
extra) makes an sdist and a wheel without a warning, and the wheel's metadata version is
``kfp_gpu.__version__`` (the one place the version lives; pyproject reads it, dynamic).

The sources are copied to a temporary folder first, so setuptools' ``build/`` and
``*.egg-info`` never land in the checkout (its ``build/`` holds the wheelhouse).
``PYTHONDONTWRITEBYTECODE`` is cleared for the build: with it set, setuptools itself warns
"byte-compiling is disabled", which says nothing about the project.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import kfp_gpu

ROOT = Path(__file__).resolve().parents[2]
#: What the distribution is built from (pyproject.toml package-dir and readme).
SOURCES = ("pyproject.toml", "README.md", "kfp_gpu", "components", "pipelines")

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    pytest.importorskip("build", reason="pypa/build is in the dev extra")
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    out = src / "dist"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "", "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                           str(out), str(src)], check=False, cwd=src, env=env,
                          capture_output=True,
                          text=True, timeout=540)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return out, log


def test_build_has_no_warning(built):
    _, log = built
    lines = [ln for ln in log.splitlines()
             if "warning" in ln.lower() or "deprecat" in ln.lower()]
    assert not lines, "\n".join(lines)


def test_wheel_metadata_version_is_the_package_version(built):
    out, _ = built
    version = kfp_gpu.__version__
    (wheel,) = out.glob("*.whl")
    assert wheel.name == f"kfp_gpu-{version}-py3-none-any.whl"
    assert (out / f"kfp_gpu-{version}.tar.gz").is_file()
    with zipfile.ZipFile(wheel) as zf:
        meta = email.message_from_bytes(zf.read(f"kfp_gpu-{version}.dist-info/METADATA"))
        names = zf.namelist()
        entry_points = zf.read(f"kfp_gpu-{version}.dist-info/entry_points.txt").decode()
    assert meta["Version"] == version
    assert meta["License-Expression"] == "Apache-2.0"
    assert "kfp-gpu = kfp_gpu.cli:main" in entry_points
    # the compiled YAML ships with the packages (package-data)
    assert "kfp_gpu/pipelines/imdb_lstm.yaml" in names
    assert "kfp_gpu/components/train_resnet_horovod/component.yaml" in names
