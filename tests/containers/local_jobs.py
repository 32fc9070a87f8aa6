"""Helpers the local-runner container tests share (test_local_mpijob.py,
test_local_trainjob.py): a sampler of the job's processes and conditions, running a job to
its end, checking that nothing of it is left, and the small-ResNet Fashion-MNIST run both
backends make (its options and the checks on rank 0's metrics)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.spec import network, ssh, volumes
from kfp_gpu.mpi.spec.options import MPIJobOptions

UID = ssh.MPI_USER_ID


class Sampler:
    """Samples ``docker top`` of the job's running containers until stopped: (uid, args)
    of every process seen, and each condition type in the order it appeared."""

    def __init__(self, runner: local_runner.LocalMPIJobRunner):
        self.runner, self.procs, self.conditions = runner, set(), []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def on_status(self, status: dict) -> None:
        for c in status["conditions"]:
            if c["status"] == "True" and c["type"] not in self.conditions:
                self.conditions.append(c["type"])

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            for c in self.runner.containers():
                top = {}
                with contextlib.suppress(Exception):  # the container may just have stopped
                    top = c.top(ps_args="-o pid,uid,args")
                for row in top.get("Processes") or []:
                    self.procs.add((c.name, int(row[1]), row[2]))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def ssh_files(workspace: Path) -> dict[str, tuple[int, int, int]]:
    """The ssh Secret's files in a runner's workspace: name -> (mode, uid, gid)."""
    return {p.name: (stat.S_IMODE(p.stat().st_mode), p.stat().st_uid, p.stat().st_gid)
            for p in (workspace / "ssh").iterdir()}


def run_job(client, job: dict, ssh_expected: Mapping[str, tuple[int, int, int]], **kw,
            ) -> tuple[dict, Sampler, local_runner.LocalMPIJobRunner]:
    """Run ``job`` (``kw``: runner arguments, e.g. ``runtime=``) to the end, checking the
    ssh files written before the containers start equal ``ssh_expected``; returns (status,
    sampler, runner) with the runner's containers still present (the caller deletes them)."""
    runner = local_runner.LocalMPIJobRunner(job, client, poll_s=0.2, **kw)
    sampler = Sampler(runner)
    runner.on_status = sampler.on_status
    runner.delete()  # what an interrupted earlier run may have left
    with sampler:
        runner.start()
        assert ssh_files(runner.workspace) == dict(ssh_expected)
        status = runner.wait()
    return status, sampler, runner


def assert_gone(client, runner: local_runner.LocalMPIJobRunner, workspace: Path) -> None:
    """Delete the job and check containers, network and workspace are gone."""
    runner.delete()
    assert runner.containers() == []
    assert client.networks.list(filters={"label": f"{local_runner.JOB_LABEL}={runner.key}"}) == []
    assert not workspace.exists()


def resnet_options(name: str, image: str) -> MPIJobOptions:
    """2 Workers x 1 slot training the small ResNet for 6 steps on Fashion-MNIST read from
    the PVC ``fashion`` at /data, writing to the PVC ``work`` at /work (``run/``): the same
    options for an MPIJob (``mpijob.build``) and a TrainJob (``trainjob.build``)."""
    args = rt.trainer_args(
        "/data/fashion-mnist", "", "/work/run", epochs=1, batch_size=32, steps_per_epoch=6,
        learning_rate=0.001, lr_warmup_steps=2, optimizer="adam", model="small", blocks=1,
        width=8, mixed_precision=False, xla=False, seed=7)
    settings = {**rt.cpu_worker_settings(),
                "volumes": (volumes.PvcMount("fashion", "/data", read_only=True),
                            volumes.PvcMount("work", "/work"))}
    return rt.job_options(
        name=name, namespace="ci", image=image, args=args, workers=2,
        settings=settings, rdma=False, rdma_resource=network.RDMA_SHARED_DEVICE_A,
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="512Mi", run_id="local", task_name="train")


def resnet_pvc_dirs(shared_data: Path, tmp_path: Path) -> dict[str, str]:
    """Folders for :func:`resnet_options`' PVCs: the real data (read-only) and a work
    folder owned by uid 1000 (what fsGroup does to a real PVC; bind mounts keep owners).

    Raises:
        pytest's Failed: the Fashion-MNIST data is missing (set KFP_GPU_DATA_DIR).
    """
    import pytest

    data = shared_data / "fashion-mnist"
    if not data.is_dir():
        pytest.fail(f"{data} not found: set KFP_GPU_DATA_DIR")
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, UID, UID)
    return {"fashion": str(data.parent), "work": str(work)}


def check_resnet_run(work: Path, sampler: Sampler, hosts: set[str]) -> list[dict]:
    """Rank 0's metrics of a :func:`resnet_options` run: 2 ranks on ``hosts`` that read
    different batches and end with identical weights after 6 steps, the 10,000 test rows,
    model and metrics written by uid 1000, a trainer on every host and every process seen
    as uid 1000. Returns the per-rank records (callers check their order)."""
    m = json.loads((work / "run" / "metrics.json").read_text())
    ranks = m["ranks"]
    assert m["world_size"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert {r["host"] for r in ranks} == hosts
    assert ranks[0]["first_batch_sha256"] != ranks[1]["first_batch_sha256"]
    assert ranks[0]["trainable_checksum"] == ranks[1]["trainable_checksum"]
    assert m["weights_identical"] is True and m["weights_sum_spread"] == 0.0
    assert all(r["steps_run"] == 6 for r in ranks) and m["test_rows"] == 10000
    model = work / "run" / "model" / "model.keras"
    assert model.stat().st_uid == UID and (work / "run" / "metrics.json").stat().st_uid == UID
    pythons = {name for name, _, args in sampler.procs if "train-resnet" in args}
    assert pythons >= hosts
    assert {uid for _, uid, _ in sampler.procs} == {UID}
    return ranks
