"""The imdb-lstm pipeline end to end under kfp.local on real IMDB reviews, and reuse of
compiled component YAML in a new pipeline."""


import json
from pathlib import Path

import pytest
from kfp import components, dsl, local

from kfp_gpu.compiler.compile import package_dir
from kfp_gpu.local import run as local_run


@pytest.mark.slow
def test_imdb_lstm_pipeline_beats_majority_class(tmp_path, imdb_csv):
    summary = local_run.run(
        "imdb-lstm", {"source": str(imdb_csv), "max_rows_per_split": "2500", "epochs": "2"},
        pipeline_root=str(tmp_path))
    out = summary["outputs"]
    ev, tr = out["eval_metrics"]["metadata"], out["train_metrics"]["metadata"]
    assert ev["rows"] == 2500
    # the majority-class rate of the test subset, read from prep_text's own output
    stats_file = next(Path(summary["pipeline_root"]).rglob("prep-text/stats"))
    pos = json.loads(stats_file.read_text())["test"]["positive_share"]
    majority = max(pos, 1 - pos)
    assert ev["accuracy"] > majority + 0.05, (ev, majority)
    assert ev["roc_auc"] > 0.7
    assert tr["epochs_run"] == 2 and tr["cudnn_eligible"] == 1.0
    assert tr["samples_per_sec"] > 0
    assert out["passed"] == (ev["accuracy"] >= 0.8)
    import keras

    model = keras.saving.load_model(Path(out["model"]["uri"]) / "model.keras")
    assert model.input_shape == (None, 80) and model.output_shape == (None, 1)
    report = next(Path(summary["pipeline_root"]).rglob("evaluate-classifier/report"))
    assert "Confusion matrix" in report.read_text()
    page = Path(out["report"]["uri"]).read_text()  # the HTML report, a pipeline output
    for alt in ("Confusion matrix", "ROC curve", "Precision/recall curve", "Training curves"):
        assert f'alt="{alt}"' in page
    assert "<table id=misclassified>" in page and "[UNK]" in page


def _loaded(name: str):
    return components.load_component_from_file(
        str(package_dir("components") / name / "component.yaml"))


def test_component_yaml_reused_in_a_new_pipeline(tmp_path, imdb_csv):
    """Load the checked-in YAML (as a user would), compose, compile strictly, run."""
    from tests.support import ir

    prep, train, evaluate = (_loaded(n) for n in
                             ("prep_text", "train_text_classifier", "evaluate_classifier"))

    @dsl.pipeline(name="my-reuse")
    def reuse(source: str):
        p = prep(source=source, max_rows_per_split=300, maxlen=20, num_words=500)
        t = train(train_data=p.outputs["train_data"], epochs=1, embedding_dim=8, lstm_units=4)
        t.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
        evaluate(model=t.outputs["model"], test_data=p.outputs["test_data"],
                 accuracy_threshold=0.0)

    from kfp import compiler

    compiler.Compiler().compile(reuse, str(tmp_path / "reuse.yaml"))
    spec, _ = ir.load(tmp_path / "reuse.yaml")
    assert sorted(spec.root.dag.tasks) == ["evaluate-classifier", "prep-text",
                                           "train-text-classifier"]
    acc = ir.container(spec, "train-text-classifier").resources.accelerator
    assert (acc.resource_type, acc.resource_count) == ("nvidia.com/gpu", "1")

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "r"),
               raise_on_error=True)
    reuse(source=str(imdb_csv))
    out = json.loads(next((tmp_path / "r").rglob("evaluate-classifier/executor_output.json"))
                     .read_text())
    metrics = out["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    assert metrics["rows"] == 300 and 0.0 <= metrics["accuracy"] <= 1.0
    md = next((tmp_path / "r").rglob("evaluate-classifier/report")).read_text()
    assert "Examples: 300." in md
