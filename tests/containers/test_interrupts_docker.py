"""SIGINT/SIGTERM to the ``kfp-gpu`` console script while its containers run:
``run --local --runner docker`` removes the task containers (label
``kfp-gpu.local-run=<run id>``), ``mpijob run-local`` removes every container and the
network of the MPIJob or TrainJob; exit 130 / 143, one ``interrupted`` line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfp_gpu.local import docker as local_docker
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.spec import mpijob, trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.containers.engine import unique
from tests.support.waiting import wait_for_line

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

KFP_GPU = str(Path(sys.executable).with_name("kfp-gpu"))
SLEEPER = ("python", "-c", "import time; print('up', flush=True); time.sleep(300)")


def _stop(proc: subprocess.Popen, sig: int) -> str:
    proc.send_signal(sig)
    try:
        rest, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    return rest


def _run_containers(client, pid: int) -> list:
    return [c for c in client.containers.list(all=True, filters={"label": local_docker.RUN_LABEL})
            if c.labels.get(local_docker.RUN_LABEL, "").endswith(f"-{pid}")]


def test_runner_docker_sigterm_removes_the_task_container(docker_engine, image, shared_data,
                                                         tmp_path):
    image("trainer")
    proc = subprocess.Popen(
        [KFP_GPU, "run", "imdb-lstm", "--local", "--runner", "docker", "--pipeline-root",
         str(tmp_path / "root"), "-p", "epochs=1", "-p", "max_rows_per_split=1000"],
        cwd=tmp_path, env={**os.environ, "KFP_GPU_DATA_DIR": str(shared_data)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = wait_for_line(proc, "[train-text-classifier] started")
        deadline = time.monotonic() + 60
        while not _run_containers(docker_engine, proc.pid):  # the task's container is up
            assert time.monotonic() < deadline, seen
            time.sleep(0.5)
    except BaseException:
        proc.kill()
        raise
    rest = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 143, "\n".join(seen) + rest
    assert [x for x in rest.splitlines() if x.startswith("interrupted")], rest
    assert "Traceback" not in rest
    assert _run_containers(docker_engine, proc.pid) == []


def _labelled(client, key: str) -> tuple[list, list]:
    flt = {"label": f"{local_runner.JOB_LABEL}={key}"}
    return client.containers.list(all=True, filters=flt), client.networks.list(filters=flt)


@pytest.mark.parametrize(("kind", "sig", "code"), [("MPIJob", signal.SIGINT, 130),
                                                   ("TrainJob", signal.SIGTERM, 143)])
def test_run_local_signal_removes_the_job(docker_engine, horovod_image, tmp_path, kind, sig,
                                          code):
    name = unique(f"lint-{kind.lower()}-{int(sig)}")
    opts = MPIJobOptions.from_settings(name=name, namespace="ci", image=horovod_image,
                                       program=SLEEPER, workers=2)
    build = mpijob if kind == "MPIJob" else trainjob
    f = tmp_path / "job.yaml"
    f.write_text(build.to_yaml(build.build(opts)), encoding="utf-8")
    proc = subprocess.Popen([KFP_GPU, "mpijob", "run-local", str(f), "--image", horovod_image],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = wait_for_line(proc, "up")  # rank output: the Launcher's mpirun started the program
    except BaseException:
        proc.kill()
        raise
    assert _labelled(docker_engine, f"ci.{name}")[0], "no container of the job"
    rest = _stop(proc, sig)
    assert proc.returncode == code, "\n".join(seen) + rest
    lines = [x for x in rest.splitlines() if x.startswith("interrupted")]
    assert len(lines) == 1 and f"{kind} ci.{name}" in lines[0], rest
    assert _labelled(docker_engine, f"ci.{name}") == ([], [])


def test_run_local_over_a_leftover_job_is_one_line_exit_2(docker_engine, horovod_image,
                                                         tmp_path):
    """What an earlier run left (here its network) is named, with --replace as the way out."""
    name = unique("lint-leftover")
    opts = MPIJobOptions.from_settings(name=name, namespace="ci", image=horovod_image,
                                       program=("true",), workers=1)
    f = tmp_path / "job.yaml"
    f.write_text(mpijob.to_yaml(mpijob.build(opts)), encoding="utf-8")
    net = docker_engine.networks.create(f"kfp-gpu-h22-{name}",
                                        labels={local_runner.JOB_LABEL: f"ci.{name}"})
    try:
        res = subprocess.run([KFP_GPU, "mpijob", "run-local", str(f)], capture_output=True,
                             text=True, timeout=120, check=False)
    finally:
        net.remove()
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(errors) == 1 and "exist already" in errors[0] and "--replace" in errors[0]
    assert "Traceback" not in res.stderr
