"""``kfp-gpu run PIPELINE --local --runner docker``: every task in the image its compiled
spec names (kfp.local.DockerRunner, tests against the locally built tags).

Evidence: the same imdb-lstm subset gives the same metrics under the docker runner as under
the subprocess runner (the components are seeded; the tolerance covers float32 summation
order in the two processes' thread pools), the tasks really ran in the trainer image as
uid 1000 (the files they wrote), and fractional-eval over the docker run's model and test
set combines its shards into exactly the metrics of the single evaluation task.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kfp_gpu.local import run as local_run

pytestmark = [pytest.mark.container, pytest.mark.timeout(1200)]

PARAMS = {"max_rows_per_split": "1000", "epochs": "1"}
UID = 1000


@pytest.fixture(scope="module")
def trainer(image) -> str:
    return image("trainer")


@pytest.fixture(scope="module")
def runs(trainer, shared_data, tmp_path_factory) -> dict:
    """imdb-lstm on 1,000 + 1,000 real reviews, 1 epoch, under both runners."""
    out = {}
    for runner in ("subprocess", "docker"):
        root = tmp_path_factory.mktemp(runner)
        out[runner] = local_run.run("imdb-lstm", dict(PARAMS), pipeline_root=str(root),
                                    data_dir=str(shared_data), runner=runner)
    return out


def test_docker_runner_gives_the_subprocess_metrics(runs):
    sub, dock = (runs[r]["outputs"] for r in ("subprocess", "docker"))
    assert set(runs["docker"]["tasks"]) == {"prep-text", "train-text-classifier",
                                            "evaluate-classifier"}
    assert all(status == "SUCCESS" for status, _ in runs["docker"]["tasks"].values())
    ev_s, ev_d = sub["eval_metrics"]["metadata"], dock["eval_metrics"]["metadata"]
    assert ev_s["rows"] == ev_d["rows"] == 1000
    for key in ("accuracy", "roc_auc", "f1", "loss"):
        assert math.isclose(ev_s[key], ev_d[key], abs_tol=0.01), (key, ev_s, ev_d)
    tr_s, tr_d = sub["train_metrics"]["metadata"], dock["train_metrics"]["metadata"]
    assert tr_s["epochs_run"] == tr_d["epochs_run"] == 1
    for key in ("loss", "accuracy"):  # the last epoch's training figures
        assert math.isclose(tr_s[key], tr_d[key], abs_tol=0.01), (key, tr_s, tr_d)
    # prep is pure and exact: identical vocabulary under both runners
    vocab = [next(Path(runs[r]["pipeline_root"]).rglob("prep-text/vocabulary")).read_bytes()
             for r in ("subprocess", "docker")]
    assert vocab[0] == vocab[1]


def test_docker_tasks_ran_in_the_image_as_uid_1000(runs):
    model = Path(runs["docker"]["outputs"]["model"]["uri"]) / "model.keras"
    assert model.stat().st_uid == UID
    sub_model = Path(runs["subprocess"]["outputs"]["model"]["uri"]) / "model.keras"
    assert sub_model.stat().st_uid != UID  # the subprocess runner runs as this user


def test_fractional_eval_in_docker_combines_to_the_single_task_metrics(runs):
    dock = runs["docker"]
    root = dock["pipeline_root"]
    test_data = next(Path(root).rglob("prep-text/test_data"))
    frac = local_run.run("fractional-eval", {
        "model_uri": dock["outputs"]["model"]["uri"], "test_data_uri": str(test_data),
        "num_shards": "2", "accuracy_threshold": "0.0"}, pipeline_root=root, runner="docker")
    combined = frac["outputs"]["metrics"]["metadata"]
    single = dock["outputs"]["eval_metrics"]["metadata"]
    assert combined["shards"] == 2 and combined["rows"] == single["rows"] == 1000
    for key in ("accuracy", "precision", "recall", "f1"):
        assert combined[key] == single[key], key  # counts over the same predictions
    for key in ("roc_auc", "loss"):
        assert math.isclose(combined[key], single[key], rel_tol=1e-6, abs_tol=1e-7), key
