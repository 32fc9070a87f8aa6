"""Opt-in (marker ``e2e``): the launcher and ``kfp-gpu doctor`` against a real cluster,
each skipped unless its variables name one (README "Tests", docs/distributed.md).

- MPIJob: ``KUBECONFIG`` and ``KFP_GPU_E2E_MPIJOB=1`` (a cluster with the MPI Operator);
- TrainJob: ``KUBECONFIG`` and ``KFP_GPU_E2E_TRAINJOB=1`` (Kubeflow Trainer v2.3.0, JobSet
  and manifests/trainer applied);
- doctor: ``KFP_GPU_E2E_KUBECONFIG`` (optional ``KFP_GPU_E2E_NAMESPACE``,
  ``KFP_GPU_E2E_GPU``, ``KFP_GPU_E2E_HOST``).

The job tests take ``KFP_GPU_E2E_NAMESPACE`` (default ``default``), ``KFP_GPU_E2E_IMAGE``
(default the released horovod image), ``KFP_GPU_E2E_PROGRAM`` (default one Python line
printing each rank's host), ``KFP_GPU_E2E_GPU`` (default ``none``),
``KFP_GPU_E2E_WORKERS`` (default 2) and ``KFP_GPU_E2E_RDMA=1``.
"""

from __future__ import annotations

import os
import shlex
import time

import pytest
import typer
from typer.testing import CliRunner

from kfp_gpu.cli import doctor as doctor_cli
from kfp_gpu.mpi.launch import launcher
from kfp_gpu.mpi.spec import backends, mpijob, names, trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from kfp_gpu.release import images


def small_job_options(kind: str) -> MPIJobOptions:
    """The e2e job's options from the environment (see the module's docstring); the MPIJob
    is collected 600 s after it ends (a TrainJob's TTL is its runtime's, fixed)."""
    ttl = {"ttl_seconds_after_finished": 600} if kind == "mpijob" else {}
    program = tuple(shlex.split(os.environ.get(
        "KFP_GPU_E2E_PROGRAM",
        "python -c \"import socket; print('rank on', socket.gethostname())\"")))
    return MPIJobOptions.from_settings(
        name=names.job_name(f"e2e-{time.time_ns()}", kind, prefix="kfp-gpu-e2e"),
        namespace=os.environ.get("KFP_GPU_E2E_NAMESPACE", "default"),
        image=os.environ.get("KFP_GPU_E2E_IMAGE", images.image("horovod")),
        program=program, gpu=os.environ.get("KFP_GPU_E2E_GPU", "none"),
        workers=int(os.environ.get("KFP_GPU_E2E_WORKERS", "2")),
        rdma=os.environ.get("KFP_GPU_E2E_RDMA") == "1", active_deadline_seconds=1800, **ttl)


def follow_reattach_delete(job: dict, backend: backends.Backend, kind: str, tmp_path) -> None:
    """Create ``job``, follow it to its end (Succeeded), launch it again (it re-attaches
    to the same object by uid), then delete it whatever happened."""
    api = launcher.api_client()
    record = tmp_path / "rec.json"
    lines: list[str] = []
    try:
        result = launcher.launch(job, record, api, log_sink=lines.append,
                                 handle_sigterm=False, watch_timeout_s=30)
        assert result.status == "Succeeded" and result.record.kind == kind, lines[-20:]
        assert result.log_tail, "no launcher log"
        again = launcher.launch(job, record, api, handle_sigterm=False)
        assert again.reattached and again.record.uid == result.record.uid
    finally:
        lc = launcher.Launcher(api, backend=backend)
        lc.name, lc.namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        lc.delete()


def test_the_e2e_jobs_build_from_the_default_environment(monkeypatch):
    """Not opt-in: the specs the opt-in tests send are valid for their backend with no
    variable set (a TrainJob refuses options its runtime fixes, e.g. a TTL)."""
    for var in [v for v in os.environ if v.startswith("KFP_GPU_E2E_")]:
        monkeypatch.delenv(var)
    m = mpijob.build(small_job_options("mpijob"))
    t = trainjob.build(small_job_options("trainjob"))
    assert m["kind"] == "MPIJob" and t["kind"] == "TrainJob"
    assert m["metadata"]["name"].startswith("kfp-gpu-e2e")
    assert t["metadata"]["name"].startswith("kfp-gpu-e2e")
    assert m["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 600
    assert m["metadata"]["namespace"] == t["metadata"]["namespace"] == "default"


@pytest.mark.e2e
@pytest.mark.skipif(not (os.environ.get("KUBECONFIG")
                         and os.environ.get("KFP_GPU_E2E_MPIJOB") == "1"),
                    reason="needs KUBECONFIG and KFP_GPU_E2E_MPIJOB=1 (a cluster with the "
                           "MPI Operator; see docs/distributed.md)")
def test_a_small_mpijob_runs_reattaches_and_is_deleted(tmp_path):
    job = mpijob.build(small_job_options("mpijob"))
    follow_reattach_delete(job, backends.MPIJOB, "MPIJob", tmp_path)


@pytest.mark.e2e
@pytest.mark.skipif(not (os.environ.get("KUBECONFIG")
                         and os.environ.get("KFP_GPU_E2E_TRAINJOB") == "1"),
                    reason="needs KUBECONFIG and KFP_GPU_E2E_TRAINJOB=1 (a cluster with "
                           "Kubeflow Trainer v2.3.0, JobSet and manifests/trainer applied; "
                           "see docs/distributed.md)")
def test_a_small_trainjob_runs_reattaches_and_is_deleted(tmp_path):
    job = trainjob.build(small_job_options("trainjob"))
    follow_reattach_delete(job, backends.TRAINJOB, "TrainJob", tmp_path)


@pytest.mark.e2e
@pytest.mark.skipif(not os.environ.get("KFP_GPU_E2E_KUBECONFIG"),
                    reason="set KFP_GPU_E2E_KUBECONFIG (and KFP_GPU_E2E_GPU) for a real cluster")
def test_doctor_says_the_cluster_is_ready():
    app = typer.Typer()
    app.command()(doctor_cli.doctor_command)
    args = ["--kubeconfig", os.environ["KFP_GPU_E2E_KUBECONFIG"],
            "--gpu", os.environ.get("KFP_GPU_E2E_GPU", "gpu:1")]
    if os.environ.get("KFP_GPU_E2E_NAMESPACE"):
        args += ["--namespace", os.environ["KFP_GPU_E2E_NAMESPACE"]]
    if os.environ.get("KFP_GPU_E2E_HOST"):
        args += ["--kfp-host", os.environ["KFP_GPU_E2E_HOST"]]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
