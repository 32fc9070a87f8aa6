"""resnet-horovod end to end under kfp.local: prep_images (real Fashion-MNIST) ->
train_resnet_horovod (local execution: mpirun -np 2) -> evaluate_classifier."""

import json
from pathlib import Path

import pytest

from kfp_gpu.local import run as local_run


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_resnet_horovod_pipeline_local(tmp_path, shared_data):
    summary = local_run.run(
        "resnet-horovod",
        {"source": str(shared_data / "fashion-mnist"), "max_rows_per_split": "3000",
         "steps_per_epoch": "40", "epochs": "1", "width": "8", "blocks": "1",
         "optimizer": "adam", "learning_rate": "0.001", "lr_warmup_steps": "10",
         "accuracy_threshold": "0.3"},
        pipeline_root=str(tmp_path))
    out = summary["outputs"]
    tr, ev = out["train_metrics"]["metadata"], out["eval_metrics"]["metadata"]
    assert tr["world_size"] == 2 and tr["weights_identical"] == 1.0
    assert tr["img_per_sec_total"] > tr["img_per_sec_per_gpu"] > 0
    assert ev["rows"] == 3000 and ev["accuracy"] > 0.3  # chance: 0.10
    # the evaluator scored the very model rank 0 saved (same test set, same accuracy)
    assert ev["accuracy"] == pytest.approx(tr["test_accuracy"], abs=1e-6)
    assert out["passed"] is True
    record = json.loads(next(Path(summary["pipeline_root"]).rglob(
        "train-resnet-horovod/mpijob")).read_text())
    assert record["execution"] == "local" and record["processes"] == 2
    full = json.loads(next(Path(summary["pipeline_root"]).rglob(
        "train-resnet-horovod/trainer_metrics")).read_text())
    assert len(full["ranks"]) == 2
    assert (Path(out["model"]["uri"]) / "model.keras").exists()
