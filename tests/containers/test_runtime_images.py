"""Each runtime image, run as a container: user, pinned versions, entry points, labels.

Needs a Docker engine (DOCKER_HOST) and the images built by ``make images-local``
(tests/containers/README.md). The pins come from the repository, not from the Dockerfiles,
so a Dockerfile that drifts from pyproject.toml / requirements/tensorflow.txt fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib

import kfp_gpu
from tests.containers.engine import NAMES, module_path

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]
TRAINING = ("trainer", "horovod")

VERSIONS = """
import importlib, json
out = {}
for mod in ("kfp_gpu", "kfp", "keras", "tensorflow", "horovod"):
    try:
        out[mod] = importlib.import_module(mod).__version__
    except ImportError as exc:
        out[mod] = "ImportError: " + str(exc)
print(json.dumps(out))
"""


def _pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def pin(reqs: list[str], dist: str) -> str:
        for req in reqs:
            m = re.fullmatch(rf"{re.escape(dist)}==([\w.]+)", req.strip())
            if m:
                return m.group(1)
        raise AssertionError(f"{dist} not pinned in {reqs}")

    tf = re.search(r"^tensorflow(?:-cpu)?==([\w.]+)",
                   (ROOT / "requirements" / "tensorflow.txt").read_text(), re.MULTILINE)
    hvd = re.search(r"\bhorovod==([\w.]+)", (ROOT / "scripts" / "setup.sh").read_text())
    return {"kfp_gpu": kfp_gpu.__version__,  # the one version (pyproject reads it: dynamic)
            "kfp": pin(project["dependencies"], "kfp"),
            "keras": pin(project["optional-dependencies"]["train"], "keras"),
            "tensorflow": tf.group(1), "horovod": hvd.group(1)}


@pytest.mark.parametrize("name", NAMES)
def test_runs_as_uid_1000_with_a_writable_home(name, image, run_in):
    out = run_in(image(name), ["bash", "-c", 'id -u; id -g; touch "$HOME/probe" && echo "$HOME"'])
    uid, gid, home = out.check().split()
    assert (uid, gid) == ("1000", "1000")
    assert home == ("/home/mpiuser" if name == "horovod" else "/home/kfp")


@pytest.mark.parametrize("name", NAMES)
def test_pinned_versions_import(name, image, run_in):
    got = json.loads(run_in(image(name), ["python", "-c", VERSIONS]).check().splitlines()[-1])
    pins = _pins()
    assert got["kfp_gpu"] == pins["kfp_gpu"] == kfp_gpu.__version__
    assert got["kfp"] == pins["kfp"]
    if name in TRAINING:
        assert (got["keras"], got["tensorflow"]) == (pins["keras"], pins["tensorflow"])
    else:  # the launcher image is the core only: no TensorFlow, no Keras
        assert got["tensorflow"].startswith("ImportError") and got["keras"].startswith("ImportError")
    if name == "horovod":
        assert got["horovod"] == pins["horovod"]
    else:
        assert got["horovod"].startswith("ImportError")


@pytest.mark.parametrize("name", NAMES)
def test_cli_answers(name, image, run_in):
    out = run_in(image(name), ["kfp-gpu", "--help"]).check()
    assert "Usage" in out and "compile" in out


def test_launcher_entry_point_answers(image, run_in):
    """`python -m kfp_gpu.mpi.launch.launcher` is what the launcher image is for."""
    out = run_in(image("launcher"), ["python", "-m", module_path("launcher.py"), "--help"])
    assert "usage" in out.check().lower()


@pytest.mark.parametrize("name", TRAINING)
def test_kfp_executor_and_tensorflow_run(name, image, run_in):
    """The lightweight-component executor imports (install_kfp_package=False) and TensorFlow
    computes on the Keras TensorFlow backend."""
    code = ("import kfp.dsl.executor_main, keras, tensorflow as tf; "
            "print(keras.backend.backend(), float(tf.reduce_sum(tf.range(5.0))))")
    assert run_in(image(name), ["python3", "-c", code]).check().split()[-2:] == [
        "tensorflow", "10.0"]


def test_horovod_trainer_entry_point_answers(image, run_in):
    """What the MPIJob's ranks run (kfp_gpu.mpi.spec.options: program kfp-gpu train-resnet)."""
    out = run_in(image("horovod"), ["kfp-gpu", "train-resnet", "--help"]).check()
    assert "--epochs" in out and "--steps" in out and "--allreduce" in out


def test_horovod_mpi_build_and_mpirun(image, run_in):
    ref = image("horovod")
    assert "Open MPI" in run_in(ref, ["mpirun", "--version"]).check()
    # Horovod's TensorFlow ops load; MPI built; CPU flavour: no NCCL (horovodrun
    # --check-build reports the same, in a minute instead of seconds).
    code = ("import kfp_gpu, horovod.tensorflow as hvd; "
            "print(hvd.mpi_built(), bool(hvd.nccl_built()), hvd.gloo_built())")
    assert run_in(ref, ["python", "-c", code]).check().split()[-3:] == ["True", "False", "False"]
    assert run_in(ref, ["bash", "-c", "command -v horovodrun"]).check().strip() == \
        "/opt/venv/bin/horovodrun"


def test_horovod_allreduce_across_two_ranks(image, run_in):
    """Two MPI ranks in one container: Horovod's allreduce sums the ranks' values. Each rank
    prints its line in one write: the image sets PYTHONUNBUFFERED, where print(a, b, ...)
    writes piece by piece and two ranks' lines can interleave."""
    code = ("import horovod.tensorflow as hvd, tensorflow as tf; hvd.init(); "
            "s = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum); "
            "print(f'rank {hvd.rank()} of {hvd.size()} sum {float(s)}\\n', end='')")
    out = run_in(image("horovod"), ["mpirun", "-n", "2", "python", "-c", code],
                 timeout_s=300).check()
    assert sorted(re.findall(r"rank (\d) of 2 sum 3\.0", out)) == ["0", "1"], out


def test_horovod_sshd_config_valid_as_uid_1000(image, run_in):
    """sshd as the MPI Operator runs it on Workers (non-root, -f ~/.sshd_config), with an
    ECDSA P-521 key where the operator's Secret would mount it (mpi-operator v0.8.2
    pkg/controller/mpi_job_controller.go: ssh key Secret, sshAuthMountPath)."""
    script = ("set -e; mkdir -p ~/.ssh; ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' "
              "-f ~/.ssh/id_rsa; /usr/sbin/sshd -t -f ~/.sshd_config && echo sshd-config-ok; "
              "/usr/sbin/sshd -T -f ~/.sshd_config | grep -E '^(port|strictmodes|setenv) '; "
              "/usr/sbin/sshd -T -f /etc/ssh/sshd_config -h ~/.ssh/id_rsa | grep '^setenv '")
    out = run_in(image("horovod"), ["bash", "-c", script]).check()
    assert "sshd-config-ok" in out
    assert "port 2222" in out and "strictmodes no" in out
    # both configs (the non-root Workers' and root's system one) hand every ssh session the
    # image's PATH, the virtualenv first
    paths = [ln for ln in out.splitlines() if ln.startswith("setenv PATH=")]
    assert len(paths) == 2 and all(ln.startswith("setenv PATH=/opt/venv/bin:") for ln in paths)
    assert out.count("setenv PYTHONUNBUFFERED=1") == 2, out


@pytest.mark.parametrize("name", NAMES)
def test_oci_labels(name, image, docker_client):
    labels = docker_client.images.get(image(name)).labels
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert labels["org.opencontainers.image.title"] == f"kfp-gpu-{name}"
    assert labels["org.opencontainers.image.version"] == kfp_gpu.__version__
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.licenses"] == project["license"]  # SPDX string
    config = docker_client.images.get(image(name)).attrs["Config"]
    assert config["User"] == "1000:1000"
