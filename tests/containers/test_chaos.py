"""Chaos on the local MPIJob runner: a Worker killed mid-training.

The small ResNet trains with the project's Horovod trainer on 2 Workers x 1 slot, writing
a checkpoint at each epoch end to a shared work folder (the PVC ``work``). Once the first
checkpoint is there, Worker 1's container is SIGKILLed (a node lost, an OOM kill). The
MPIJob must end Failed with the reason, and after ``delete()`` nothing of it is left. A
second run of the same MPIJob on the same work folder (what a retried pipeline task does:
same deterministic job name, same PVC) resumes from the last checkpoint and ends with the
weights of an uninterrupted run.

Tolerance: 1e-6 absolute on every weight of ``model.keras``. The trainer is deterministic
for a given seed and world size: batches are shuffled by a seed of the epoch
(``horovod_runtime.batches``), the learning rate follows the global step, model, optimizer
(Adam's moments and iteration count) and global step are in the checkpoint, and the
BatchNorm statistics are averaged over the ranks before each checkpoint. Measured here: the
resumed run's weights are bitwise equal to the uninterrupted run's (max abs difference 0.0,
same SHA-256 over all weights; printed with ``-s``), so the bound only leaves room for a
kernel summing in another order (float32 rounding, ~1e-7 relative), not for a lost optimizer
state or another data order: each changes the Adam updates that follow, and an Adam update
moves a weight by up to about the learning rate (2e-3 here, 0.001 x 2 ranks).

Synthetic data (512 rows: 8 steps of 32 per rank and epoch, about 0.6 s here; 85 test rows)
keeps the three runs short: about 55 s in all on 2 cores. The kill comes about 0.2 s after
the first checkpoint, 5 epochs before the end; the test checks it landed mid-training.
Worker 1's death gives the runner-only reason ``WorkerFailed/Error`` (exit 137): upstream the
Worker pod would only be counted Failed and the Launcher's mpirun would fail, the Launcher
Job then failing by its backoff rule (docs/local-mpijob.md).
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import mpijob, network, ssh, volumes
from tests.containers import local_jobs
from tests.containers.engine import unique
from tests.containers.local_jobs import assert_gone

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

UID = ssh.MPI_USER_ID
EPOCHS, STEPS = 6, 8
TOLERANCE = 1e-6


def chaos_job(name: str, image: str) -> dict:
    """The MPIJob: 2 Workers x 1 slot, the small ResNet on 512 synthetic rows, ``EPOCHS``
    epochs of ``STEPS`` steps, outputs and checkpoints in ``/work/run`` (PVC ``work``)."""
    args = rt.trainer_args(
        "synthetic", "", "/work/run", epochs=EPOCHS, batch_size=32, steps_per_epoch=STEPS,
        learning_rate=0.001, lr_warmup_steps=4, optimizer="adam", model="small", blocks=1,
        width=8, mixed_precision=False, xla=False, seed=7)
    args += ["--synthetic-rows", str(2 * 32 * STEPS), "--warmup-steps", "1"]
    settings = {**rt.cpu_worker_settings(), "volumes": (volumes.PvcMount("work", "/work"),)}
    return mpijob.build(rt.job_options(
        name=name, namespace="ci", image=image, args=args, workers=2, settings=settings,
        rdma=False, rdma_resource=network.RDMA_SHARED_DEVICE_A, multus_networks="",
        nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="", shm_size="256Mi",
        run_id=unique("chaos"), task_name="train"))


def work_dir(tmp_path: Path, name: str) -> Path:
    """A work folder owned by uid 1000 (what fsGroup does to a PVC)."""
    d = tmp_path / name
    d.mkdir()
    os.chown(d, UID, UID)
    return d


def weights(model_keras: Path) -> dict[str, np.ndarray]:
    """Every weight array of a Keras 3 ``.keras`` file (its ``model.weights.h5``), by path."""
    import h5py

    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(model_keras) as z, h5py.File(
            io.BytesIO(z.read("model.weights.h5")), "r") as h5:
        h5.visititems(lambda k, v: out.__setitem__(k, np.asarray(v))
                      if isinstance(v, h5py.Dataset) else None)
    return out


def run(client, job: dict, work: Path, kill_after_checkpoint: bool = False):
    """Run ``job`` on ``work``; with ``kill_after_checkpoint`` SIGKILL Worker 1 as soon as
    the first checkpoint is complete (the CheckpointManager's ``checkpoint`` state file).
    Returns (status, runner, workspace, seconds the kill came after the checkpoint)."""
    runner = local_jobs.local_runner.LocalMPIJobRunner(job, client, poll_s=0.2,
                                                       pvc_dirs={"work": str(work)})
    runner.delete()
    killed: list[float] = []
    stop = threading.Event()

    def killer() -> None:
        state = work / "run" / "checkpoints" / "checkpoint"
        while not stop.wait(0.05):
            if state.exists():
                t = time.monotonic()
                client.containers.get(f"{runner.plan.name}-worker-1").kill()
                killed.append(time.monotonic() - t)
                return

    thread = threading.Thread(target=killer, daemon=True)
    runner.start()
    workspace = runner.workspace
    if kill_after_checkpoint:
        thread.start()
    try:
        status = runner.wait()
    finally:
        stop.set()
        if kill_after_checkpoint:
            thread.join(5)
    return status, runner, workspace, killed


def test_worker_killed_mid_training_then_the_retry_resumes(docker_engine, horovod_image,
                                                           tmp_path):
    # the uninterrupted reference
    ref_work = work_dir(tmp_path, "ref")
    status, runner, workspace, _ = run(docker_engine, chaos_job(unique("chaos-ref"), horovod_image),
                                       ref_work)
    try:
        assert status["conditions"][-1]["type"] == "Succeeded", runner.logs()[-3000:]
    finally:
        assert_gone(docker_engine, runner, workspace)
    ref = json.loads((ref_work / "run" / "metrics.json").read_text())
    assert ref["start_epoch"] == 0 and ref["global_step"] == EPOCHS * STEPS

    # run 1: Worker 1 killed once the first checkpoint exists
    job = chaos_job(unique("chaos"), horovod_image)
    work = work_dir(tmp_path, "work")
    status, runner, workspace, killed = run(docker_engine, job, work,
                                            kill_after_checkpoint=True)
    try:
        assert killed, "no checkpoint appeared: " + runner.logs()[-3000:]
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["status"] == "True" and failed["reason"] == "WorkerFailed/Error"
        assert failed["message"].startswith(f"worker {unique('chaos')}-worker-1 exited with code 137")
        assert not (work / "run" / "metrics.json").exists()  # it did not finish
    finally:
        assert_gone(docker_engine, runner, workspace)
    assert docker_engine.containers.list(
        all=True, filters={"label": f"{local_jobs.local_runner.JOB_LABEL}=ci.{unique('chaos')}"}) == []
    checkpoints = sorted(int(p.name[len("ckpt-"):-len(".index")])
                         for p in (work / "run" / "checkpoints").glob("ckpt-*.index"))
    assert checkpoints and checkpoints[-1] < EPOCHS * STEPS  # killed mid-training

    # run 2: the same MPIJob on the same folder resumes from the last checkpoint
    status, runner, workspace, _ = run(docker_engine, job, work)
    try:
        logs = runner.logs()
        assert status["conditions"][-1]["type"] == "Succeeded", logs[-3000:]
        assert f"resumed from /work/run/checkpoints/ckpt-{checkpoints[-1]}" in logs, logs[-3000:]
    finally:
        assert_gone(docker_engine, runner, workspace)
    m = json.loads((work / "run" / "metrics.json").read_text())
    assert m["resumed_from"] == f"/work/run/checkpoints/ckpt-{checkpoints[-1]}"
    assert 0 < m["start_epoch"] == checkpoints[-1] // STEPS < EPOCHS
    assert m["epochs_run"] == EPOCHS - m["start_epoch"] and m["global_step"] == EPOCHS * STEPS
    assert m["weights_identical"] is True  # both ranks, as in every run

    # its final weights are the uninterrupted run's
    got, want = (weights(w / "run" / "model" / "model.keras") for w in (work, ref_work))
    assert sorted(got) == sorted(want) and len(got) > 10
    diff = max(float(np.max(np.abs(got[k] - want[k]))) for k in want)
    assert diff <= TOLERANCE, diff
    print(f"max |w_resumed - w_uninterrupted| = {diff:g}; bitwise equal: "
          f"{m['ranks'][0]['checksum']['sha256'] == ref['ranks'][0]['checksum']['sha256']}")
