"""The local runner for a TrainJob: the TrainJob kfp_gpu.mpi.spec.trainjob builds, on the
project's ClusterTrainingRuntime (manifests/trainer/horovod-runtime.yaml, read from the
file), run as containers of the horovod image the way Kubeflow Trainer v2.3.0 + JobSet
would run it: ``node`` pods running the runtime's sshd, the ``launcher`` pod (rank host
too, ``runLauncherAsNode``) running mpirun over Trainer's hostfile and ssh Secret.

Needs a Docker engine (``DOCKER_HOST``) and the horovod image; without them the tests skip
(fail with ``CI=true``). Evidence as in test_local_mpijob.py: ranks' hosts and weight
checksums, ``docker top`` uids, TrainJob conditions with their reasons and messages.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kfp_gpu.cli import run_local as local_cli
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.spec import ssh, trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.containers import local_jobs
from tests.containers.engine import unique
from tests.containers.local_jobs import assert_gone

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

UID = ssh.MPI_USER_ID


@pytest.fixture(scope="module")
def runtime() -> dict:
    """The kfp-gpu-horovod ClusterTrainingRuntime of this checkout."""
    return yaml.safe_load(local_cli.DEFAULT_RUNTIME_FILE.read_text(encoding="utf-8"))


def run_job(client, job: dict, runtime: dict, image: str, **kw):
    """:func:`tests.containers.local_jobs.run_job` for a TrainJob, expecting the Trainer's
    ssh Secret files (plugins/mpi: id_rsa 0640, id_rsa.pub and authorized_keys 0644),
    owned by the caller and in the runtime's fsGroup 1000, as kubelet projects them."""
    expected = {"id_rsa": (0o640, os.getuid(), UID), "id_rsa.pub": (0o644, os.getuid(), UID),
                "authorized_keys": (0o644, os.getuid(), UID)}
    return local_jobs.run_job(client, job, expected, runtime=runtime, image=image, **kw)


def _node_command(runtime: dict, command: list[str]) -> dict:
    """A copy of ``runtime`` whose ``node`` job runs ``command`` (a TrainJob cannot change
    it: trainer.command reaches the launcher only)."""
    out = copy.deepcopy(runtime)
    rjob = next(r for r in out["spec"]["template"]["spec"]["replicatedJobs"]
                if r["name"] == "node")
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container["command"], container["args"] = command, []
    return out


def test_resnet_on_fashion_mnist_two_nodes_identical_weights(docker_engine, horovod_image,
                                                             runtime, shared_data, tmp_path):
    pvc_dirs = local_jobs.resnet_pvc_dirs(shared_data, tmp_path)
    job = trainjob.build(local_jobs.resnet_options(unique("ltj-resnet"), horovod_image))
    assert job["spec"]["trainer"]["numNodes"] == 2 and job["spec"]["trainer"][
        "numProcPerNode"] == 1
    status, sampler, runner = run_job(docker_engine, job, runtime, horovod_image,
                                      pvc_dirs=pvc_dirs)
    workspace = runner.workspace
    try:
        assert sampler.conditions == ["Complete"], runner.logs()[-3000:]
        complete = status["conditions"][-1]
        assert (complete["reason"], complete["message"]) == (
            "AllJobsCompleted", "jobset completed successfully")
        launcher = {j["name"]: j for j in status["jobsStatus"]}["launcher"]
        assert launcher["succeeded"] == 1 and launcher["failed"] == 0
        # one rank on the node pod, one on the launcher pod (runLauncherAsNode)
        local_jobs.check_resnet_run(Path(pvc_dirs["work"]), sampler,
                                    {f"{unique('ltj-resnet')}-launcher-0-0", f"{unique('ltj-resnet')}-node-0-0"})
        assert any("sshd" in args and name == f"{unique('ltj-resnet')}-node-0-0"
                   for name, _, args in sampler.procs)
        la = docker_engine.containers.get(f"{unique('ltj-resnet')}-launcher-0-0")
        assert la.attrs["Config"]["User"] == f"{UID}:{UID}"
        env = dict(e.split("=", 1) for e in la.attrs["Config"]["Env"])
        assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert env["OMPI_MCA_orte_set_default_slots"] == "1"
        # a finished JobSet deletes its active Jobs: node pods gone, the launcher kept
        assert [c.name for c in runner.containers()] == [f"{unique('ltj-resnet')}-launcher-0-0"]
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_node_exit_fails_the_trainjob_with_jobsets_reason(docker_engine, horovod_image,
                                                         runtime):
    job = trainjob.build(MPIJobOptions.from_settings(
        name=unique("ltj-broken"), namespace="ci", image=horovod_image, program=("true",), workers=2))
    broken = _node_command(runtime, ["sh", "-c", "echo disk on fire >&2; exit 3"])
    status, sampler, runner = run_job(docker_engine, job, broken, horovod_image)
    workspace = runner.workspace
    try:
        assert sampler.conditions == ["Failed"]
        failed = status["conditions"][-1]
        assert failed["reason"] == "ReachedMaxRestarts"  # the runtime's failurePolicy
        assert failed["message"].startswith(
            "jobset failed due to reaching max number of restarts (first failed job: "
            f"{unique('ltj-broken')}-node-0); pod {unique('ltj-broken')}-node-0-0 exited with code 3 (Error)")
        assert "disk on fire" in failed["message"]
        assert runner.containers("launcher") == []  # dependsOn node Ready: never created
        node = {j["name"]: j for j in status["jobsStatus"]}["node"]
        assert node["failed"] == 1 and node["active"] == 0
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_launcher_failure_is_final_with_backoff_limit_0(docker_engine, horovod_image,
                                                        runtime):
    job = trainjob.build(MPIJobOptions.from_settings(
        name=unique("ltj-fail"), namespace="ci", image=horovod_image, workers=2,
        program=("python", "-c", "import sys; print('trying', flush=True); sys.exit(5)")))
    status, _, runner = run_job(docker_engine, job, runtime, horovod_image)
    workspace = runner.workspace
    try:
        failed = status["conditions"][-1]
        assert failed["type"] == "Failed" and failed["reason"] == "ReachedMaxRestarts"
        assert f"(first failed job: {unique('ltj-fail')}-launcher-0)" in failed["message"]
        assert runner.logs("launcher").count("trying") >= 1
        assert runner.launcher_failures == 1  # runtime backoffLimit 0: no retry
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_run_local_command_with_the_default_runtime(docker_engine, horovod_image, tmp_path):
    code = ("from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
            # one write per line: rank 0 runs beside mpirun with the image's PYTHONUNBUFFERED
            "print(f'RANK {c.rank} {c.size} {socket.gethostname()}\\n', end='', flush=True)")
    job = trainjob.build(MPIJobOptions.from_settings(
        name=unique("ltj-cli"), namespace="ci", image=horovod_image, program=("python", "-c", code),
        workers=2, rdma=True))
    f = tmp_path / "tj.yaml"
    f.write_text(trainjob.to_yaml(job), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "kfp_gpu.cli", "mpijob", "run-local", str(f),
                          "--image", horovod_image], check=False, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    ranks = sorted(ln.split()[1:] for ln in res.stdout.splitlines() if ln.startswith("RANK "))
    assert [r[:2] for r in ranks] == [["0", "2"], ["1", "2"]], res.stdout
    assert {r[2] for r in ranks} == {f"{unique('ltj-cli')}-launcher-0-0", f"{unique('ltj-cli')}-node-0-0"}
    # rdma=True: the launcher, node 0 with ranks of its own, ran worker_start's memlock
    # check before mpirun (no verbs device here, so it warns and goes on over TCP)
    assert "kfp-gpu worker: KFP_GPU_RDMA=1 but no /dev/infiniband/uverbs*" in res.stdout
    assert "status: Complete=True AllJobsCompleted" in res.stderr
    assert docker_engine.containers.list(
        all=True, filters={"label": f"{local_runner.JOB_LABEL}=ci.{unique('ltj-cli')}"}) == []
