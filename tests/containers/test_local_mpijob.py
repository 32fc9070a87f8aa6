"""The local MPIJob runner for real: MPIJobs from the builder run as containers of the
horovod image on a user-defined Docker network, as mpi-operator would run them.

Needs a Docker engine (``DOCKER_HOST``) and the horovod image
(``kfp_gpu.release.images.image("horovod")``, built by ``make images-local``). Without them the
tests skip with the reason; with ``CI=true`` they fail.

Evidence, not exit codes: ranks report the host they ran on and their uid; ``docker top``
is sampled while the job runs (every process uid 1000); the ResNet ranks' weight
checksums are compared; status conditions, reasons and messages are checked; containers,
network and workspace are shown gone afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.spec import mpijob, ssh, volumes
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.containers import local_jobs
from tests.containers.engine import unique
from tests.containers.local_jobs import assert_gone

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

UID = ssh.MPI_USER_ID


def run_job(client, job: dict, **kw):
    """:func:`tests.containers.local_jobs.run_job` expecting mpi-operator's ssh files as
    kubelet gives them (mode 0644 off ``/root/.ssh``, owned by root, group the pods'
    ``fsGroup`` or root; kfp_gpu.mpi.local.workspace)."""
    fs_group = (job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"].get(
        "securityContext") or {}).get("fsGroup")
    expected = {n: (0o644, 0, 0 if fs_group is None else fs_group)
                for n in ("id_rsa", "id_rsa.pub", "authorized_keys")}
    return local_jobs.run_job(client, job, expected, **kw)


def test_mpi4py_allreduce_two_workers_as_uid_1000(docker_engine, horovod_image):
    code = ("from mpi4py import MPI; import os, socket; c = MPI.COMM_WORLD; "
            "s = c.allreduce(c.rank + 1); "
            "print(f'RANK {c.rank} {c.size} {s} {socket.gethostname()} {os.getuid()} "
            "{os.getgid()}\\n', end='', flush=True)")  # one write per line (see below)
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-smoke"), namespace="ci", image=horovod_image, program=("python", "-c", code),
        workers=2, gpu="gpu:1", rdma=True, shm_size="256Mi"))
    status, sampler, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        assert [c for c in status["conditions"] if c["status"] == "True"][-1]["type"] == (
            "Succeeded")
        assert sampler.conditions == ["Created", "Running", "Succeeded"]
        logs = runner.logs("launcher")
        ranks = sorted(ln.split()[1:] for ln in logs.splitlines() if ln.startswith("RANK "))
        assert ranks == [["0", "2", "3", f"{unique('lmpi-smoke')}-worker-0", str(UID), str(UID)],
                         ["1", "2", "3", f"{unique('lmpi-smoke')}-worker-1", str(UID), str(UID)]], logs
        # a quiet Launcher log: every variable mpirun forwards with -x exists in the image
        # (Open MPI warns "could not find environment variable" for an unset one), and
        # ssh does not announce each Worker's host key
        assert "could not find environment variable" not in logs, logs
        assert "Permanently added" not in logs, logs
        # every process seen in Launcher and Workers ran as uid 1000; sshd ran on Workers
        assert sampler.procs and {uid for _, uid, _ in sampler.procs} == {UID}
        assert any("sshd" in args and name.endswith("worker-0") for name, _, args in
                   sampler.procs)
        # /dev/shm got the emptyDir's sizeLimit; GPU/RDMA requests were dropped with a note
        launcher = docker_engine.containers.get(f"{unique('lmpi-smoke')}-launcher")
        assert launcher.attrs["Config"]["User"] == f"{UID}:{UID}"
        env = dict(e.split("=", 1) for e in launcher.attrs["Config"]["Env"])
        assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert env["K_MPI_JOB_ROLE"] == "launcher"
        assert any("nvidia.com/gpu" in n for n in runner.plan.notes)
        # cleanPodPolicy Running (the builder's default): Workers removed, Launcher kept
        assert [c.name for c in runner.containers()] == [f"{unique('lmpi-smoke')}-launcher"]
        assert status["replicaStatuses"]["Launcher"] == {"succeeded": 1}
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_ranks_sshd_starts_see_the_workers_device_env(docker_engine, horovod_image):
    """Env a device plugin puts into the Worker container (here HAMi's
    limit and NVIDIA's device list, set on the Worker template only, as Allocate would)
    is absent from a rank's own environment (sshd starts sessions fresh; the Launcher has
    none of it to forward with mpirun -x, and even sets NVIDIA_VISIBLE_DEVICES="") and
    reaches the rank through the Worker command's file (load_worker_env)."""
    code = ("import os, socket; from kfp_gpu.training.worker_env import load_worker_env; "
            "before = os.environ.get('CUDA_DEVICE_MEMORY_LIMIT_0', '-'); "
            "load_worker_env(); "
            # one write per line: the image's sshd sets PYTHONUNBUFFERED for ranks, where
            # print writes each piece and the newline separately and two ranks' lines
            # interleave; so the whole line, newline included, goes out with end=''
            "print(' '.join(['RANK', socket.gethostname(), before, "
            "str(os.environ.get('CUDA_DEVICE_MEMORY_LIMIT_0')), "
            "str(os.environ.get('NVIDIA_VISIBLE_DEVICES'))]) + '\\n', end='', flush=True)")
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-devenv"), namespace="ci", image=horovod_image,
        program=("python", "-c", code), workers=2))
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == list(ssh.DEFAULT_WORKER_COMMAND)
    worker["env"] += [{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "1000m"},
                      {"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-0a1b2c3d"}]
    status, _, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        logs = runner.logs("launcher")
        assert [c for c in status["conditions"] if c["status"] == "True"][-1]["type"] == (
            "Succeeded"), logs
        ranks = sorted(ln.split()[1:] for ln in logs.splitlines() if ln.startswith("RANK "))
        assert ranks == [[f"{unique('lmpi-devenv')}-worker-{i}", "-", "1000m", "GPU-0a1b2c3d"]
                         for i in (0, 1)], logs
        launcher = docker_engine.containers.get(f"{unique('lmpi-devenv')}-launcher")
        env = dict(e.split("=", 1) for e in launcher.attrs["Config"]["Env"])
        assert "CUDA_DEVICE_MEMORY_LIMIT_0" not in env and env["NVIDIA_VISIBLE_DEVICES"] == ""
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_worker_exit_fails_the_job_with_its_reason(docker_engine, horovod_image):
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-broken"), namespace="ci", image=horovod_image, program=("true",), workers=2,
        worker_command=("sh", "-c", "echo disk on fire >&2; exit 3"), clean_pod_policy="None"))
    status, sampler, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["status"] == "True" and failed["reason"] == "WorkerFailed/Error"
        assert "exited with code 3 (Error)" in failed["message"]
        assert "disk on fire" in failed["message"]
        assert "Running" not in sampler.conditions
        assert runner.containers("launcher") == []  # WaitForWorkersReady: never created
        assert len(runner.containers("worker")) == 2  # cleanPodPolicy None keeps them
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_worker_lost_while_running_fails_the_job(docker_engine, horovod_image):
    sshd = " ".join(ssh.DEFAULT_WORKER_COMMAND)
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-lost"), namespace="ci", image=horovod_image, workers=2,
        program=("python", "-c", "import time; time.sleep(120)"),
        worker_command=("sh", "-c", f"{sshd} & sleep 8; echo node lost >&2; exit 4")))
    status, sampler, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        assert sampler.conditions == ["Created", "Running", "Failed"]
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "WorkerFailed/Error"
        assert f"worker {unique('lmpi-lost')}-worker-0 exited with code 4 (Error): " in failed["message"]
        assert failed["message"].endswith("\nnode lost") and "\r" not in failed["message"]
        launcher = runner.containers("launcher")[0]
        assert launcher.attrs["State"]["Status"] == "exited"  # stopped, not left running
    finally:
        assert_gone(docker_engine, runner, workspace)


@pytest.mark.parametrize(("restart_policy", "runs", "reason", "message", "failed"), [
    # the builder's Launcher (OnFailure, mpi-operator's default): the Job controller fails
    # the Job once the container's restartCount reaches backoffLimit (2): two full runs, the
    # second restart cut short (kubernetes/kubernetes pkg/controller/job/job_controller.go
    # pastBackoffLimitOnFailure); its one pod deleted, so no pod reason is appended
    ("OnFailure", 2, "BackoffLimitExceeded", "Job has reached the specified backoff limit",
     1),
    # Never: Failed pods counted, failed > backoffLimit: three pods; the last one's empty
    # pod-level reason and message appended (mpi-operator updateMPIJobFailedStatus)
    ("Never", 3, "BackoffLimitExceeded/", "Job has reached the specified backoff limit: ",
     3),
])
def test_launcher_retries_by_the_job_controllers_rule(docker_engine, horovod_image,
                                                      restart_policy, runs, reason, message,
                                                      failed):
    """The Launcher Job's backoff rule for the restartPolicy
    mpi-operator gives it, and the operator's Failed reason and message."""
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-retry"), namespace="ci", image=horovod_image, workers=1, backoff_limit=2,
        program=("python", "-c", "import sys; print('trying', flush=True); sys.exit(5)")))
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = restart_policy
    status, _, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        failed_cond = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert (failed_cond["reason"], failed_cond["message"]) == (reason, message)
        assert status["replicaStatuses"]["Launcher"] == {"failed": failed}
        assert runner.logs("launcher").count("trying") == runs  # restarted in place
        assert runner.launcher_failures == runs
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_deadline_starts_with_the_launcher(docker_engine, horovod_image):
    """``activeDeadlineSeconds`` is the Launcher Job's (mpi-operator v0.8.2
    newLauncherJob), its clock starting with that Job, so Workers that take longer than the
    deadline to get ready do not cut the job short (the DeadlineExceeded path itself:
    tests/unit/test_mpi_local_reconcile.py)."""
    sshd = " ".join(ssh.DEFAULT_WORKER_COMMAND)
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-late"), namespace="ci", image=horovod_image, workers=1,
        active_deadline_seconds=6, worker_command=("sh", "-c", f"sleep 9; exec {sshd}"),
        program=("python", "-c", "print('started', flush=True)")))
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    status, sampler, runner = run_job(docker_engine, job)
    workspace = runner.workspace
    try:
        assert sampler.conditions == ["Created", "Running", "Succeeded"], status
        assert "started" in runner.logs("launcher")
        rec = runner._reconciler
        assert rec.deadline_start - rec.t0 >= 9  # the Launcher's creation, after sshd
    finally:
        assert_gone(docker_engine, runner, workspace)


def test_resnet_on_fashion_mnist_two_workers_identical_weights(docker_engine, horovod_image,
                                                              shared_data, tmp_path):
    pvc_dirs = local_jobs.resnet_pvc_dirs(shared_data, tmp_path)
    job = mpijob.build(local_jobs.resnet_options(unique("lmpi-resnet"), horovod_image))
    _, sampler, runner = run_job(docker_engine, job, pvc_dirs=pvc_dirs)
    workspace = runner.workspace
    try:
        assert sampler.conditions == ["Created", "Running", "Succeeded"], runner.logs()[-3000:]
        ranks = local_jobs.check_resnet_run(Path(pvc_dirs["work"]), sampler,
                                            {f"{unique('lmpi-resnet')}-worker-0", f"{unique('lmpi-resnet')}-worker-1"})
        assert [r["host"] for r in ranks] == [f"{unique('lmpi-resnet')}-worker-0", f"{unique('lmpi-resnet')}-worker-1"]
    finally:
        assert_gone(docker_engine, runner, workspace)


def _smoke_yaml(path: Path, image: str, name: str, program: tuple[str, ...]) -> Path:
    job = mpijob.build(MPIJobOptions.from_settings(
        name=name, namespace="ci", image=image, program=program, workers=2,
        volumes=(volumes.PvcMount("scratch", "/scratch"),)))
    path.write_text(mpijob.to_yaml(job), encoding="utf-8")
    return path


def _kfp_gpu(*args: str) -> list[str]:
    """The ``kfp-gpu`` console command of this checkout (same interpreter as the tests)."""
    import sys

    return [sys.executable, "-m", "kfp_gpu.cli", *args]


def test_run_local_command(docker_engine, horovod_image, tmp_path):
    import subprocess

    code = ("from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
            "open(f'/scratch/rank{c.rank}', 'w').write(socket.gethostname()); "
            "print(f'RANK {c.rank} {socket.gethostname()}\\n', end='', flush=True)")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chown(scratch, UID, UID)
    f = _smoke_yaml(tmp_path / "job.yaml", horovod_image, unique("lmpi-cli"), ("python", "-c", code))
    res = subprocess.run(_kfp_gpu("mpijob", "run-local", str(f), "--pvc", f"scratch={scratch}"),
                         check=False, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"RANK 0 {unique('lmpi-cli')}-worker-0" in res.stdout and f"RANK 1 {unique('lmpi-cli')}-worker-1" in res.stdout
    assert "status: Succeeded=True MPIJobSucceeded" in res.stderr
    assert (scratch / "rank1").read_text() == f"{unique('lmpi-cli')}-worker-1"  # the PVC folder, rw
    assert docker_engine.containers.list(
        all=True, filters={"label": f"{local_runner.JOB_LABEL}=ci.{unique('lmpi-cli')}"}) == []
    res = subprocess.run(_kfp_gpu("mpijob", "run-local", str(f)), check=False,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--pvc scratch=DIR" in res.stderr, res.stderr


def test_run_local_command_sigterm_deletes_the_job(docker_engine, horovod_image, tmp_path):
    import signal
    import subprocess
    import time

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    f = _smoke_yaml(tmp_path / "job.yaml", horovod_image, unique("lmpi-term"),
                    ("python", "-c", "import time; print('up', flush=True); time.sleep(300)"))
    proc = subprocess.Popen(_kfp_gpu("mpijob", "run-local", str(f), "--pvc",
                                     f"scratch={scratch}"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        lines.append(line)
        if "Running=True" in line or time.monotonic() > deadline:
            break
    assert any("Running=True MPIJobRunning" in ln for ln in lines), "".join(lines)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, "".join(lines) + rest
    assert f"interrupted (SIGTERM): MPIJob ci.{unique('lmpi-term')} containers and network removed" in rest
    assert docker_engine.containers.list(
        all=True, filters={"label": f"{local_runner.JOB_LABEL}=ci.{unique('lmpi-term')}"}) == []
    assert docker_engine.networks.list(
        filters={"label": f"{local_runner.JOB_LABEL}=ci.{unique('lmpi-term')}"}) == []
