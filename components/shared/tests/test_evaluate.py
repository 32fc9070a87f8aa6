"""evaluate_classifier metrics against hand-computed cases, report and ROC encoding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kfp_gpu.components.shared import evaluate as ev

# Hand case: labels and P(class 1); threshold 0.5 -> predictions [1, 0, 1, 0, 1, 0]
Y = np.array([1, 1, 0, 0, 1, 0])
S = np.array([0.9, 0.4, 0.6, 0.1, 0.8, 0.3])


def test_binary_metrics_by_hand():
    m = ev.compute_metrics(Y, S, ["neg", "pos"])
    # TP = 2 (rows 0, 4), FN = 1 (row 1), FP = 1 (row 2), TN = 2 (rows 3, 5)
    assert m["confusion_matrix"] == [[2, 1], [1, 2]]
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    # AUC = P(score_pos > score_neg): 0.9 beats 3, 0.4 beats 2 (0.1, 0.3), 0.8 beats 3 -> 8/9
    assert m["roc_auc"] == pytest.approx(8 / 9)
    loss = -np.mean(np.log([0.9, 0.4, 0.4, 0.9, 0.8, 0.7]))
    assert m["loss"] == pytest.approx(loss, rel=1e-6)
    assert m["classes"] == ["neg", "pos"] and m["rows"] == 6


def test_roc_curve_thresholds_in_unit_interval_and_monotone():
    roc = ev.compute_metrics(Y, S)["roc"]
    assert roc["fpr"][0] == 0.0 and roc["tpr"][0] == 0.0 and roc["tpr"][-1] == 1.0
    assert roc["thresholds"][0] == 1.0  # sklearn's +inf (nothing predicted positive)
    assert all(0.0 <= v <= 1.0 for v in roc["thresholds"])
    assert np.all(np.diff(roc["fpr"]) >= 0) and np.all(np.diff(roc["tpr"]) >= 0)
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 20000), rng.random(20000)
    big = ev.roc_points(y, s)
    assert 150 <= len(big["fpr"]) <= ev.MAX_CURVE_POINTS == 200
    assert (big["fpr"][0], big["tpr"][0]) == (0.0, 0.0)
    assert (big["fpr"][-1], big["tpr"][-1]) == (1.0, 1.0)
    assert all(0.0 <= v <= 1.0 for v in big["thresholds"])
    assert np.all(np.diff(big["thresholds"]) <= 0)


def test_precision_recall_points():
    pr = ev.pr_points(Y, S)
    # at threshold 0.6: predictions rows 0, 2, 4 -> precision 2/3, recall 2/3
    i = pr["thresholds"].index(0.6)
    assert pr["precision"][i] == pytest.approx(2 / 3) and pr["recall"][i] == pytest.approx(2 / 3)
    assert pr["recall"][-1] == 0.0 and pr["precision"][-1] == 1.0 and pr["thresholds"][-1] == 1.0
    rng = np.random.default_rng(1)
    big = ev.pr_points(rng.integers(0, 2, 20000), rng.random(20000))
    assert len(big["precision"]) <= 200 and all(0 <= t <= 1 for t in big["thresholds"])
    assert 0.4 < big["average_precision"] < 0.6


def test_multiclass_metrics_by_hand():
    y = np.array([0, 1, 2, 2])
    p = np.array([[0.7, 0.2, 0.1],   # -> 0 correct
                  [0.1, 0.3, 0.6],   # -> 2 wrong (true 1)
                  [0.1, 0.1, 0.8],   # -> 2 correct
                  [0.2, 0.5, 0.3]])  # -> 1 wrong (true 2)
    m = ev.compute_metrics(y, p)
    assert m["confusion_matrix"] == [[1, 0, 0], [0, 0, 1], [0, 1, 1]]
    assert m["accuracy"] == pytest.approx(0.5)
    # per class precision: 1/1, 0/1, 1/2 -> macro 0.5; recall: 1, 0, 1/2 -> 0.5
    assert m["precision"] == pytest.approx(0.5) and m["recall"] == pytest.approx(0.5)
    # per class F1: 1, 0, 0.5 -> macro 0.5
    assert m["f1"] == pytest.approx(0.5)
    assert m["loss"] == pytest.approx(-np.mean(np.log([0.7, 0.3, 0.8, 0.3])))
    assert "roc" not in m and 0.0 <= m["roc_auc"] <= 1.0


def test_single_class_auc_is_nan_not_an_error():
    m = ev.compute_metrics(np.array([1, 1]), np.array([0.7, 0.2]))
    assert math.isnan(m["roc_auc"]) and m["accuracy"] == 0.5


@pytest.mark.parametrize("y,s,msg", [
    ([], [], "no examples"),
    ([0, 1], [0.5], "2 labels but 1 scores"),
    ([0, 3], [[0.5, 0.5], [0.5, 0.5]], r"labels must be in \[0, 2\)"),
])
def test_bad_input(y, s, msg):
    with pytest.raises(ValueError, match=msg):
        ev.compute_metrics(np.array(y), np.array(s))


def test_markdown_report_gate():
    m = ev.compute_metrics(Y, S, ["neg", "pos"])
    assert "**FAIL**" in ev.markdown_report(m, 0.8)
    md = ev.markdown_report(m, 0.6)
    assert "**PASS**" in md and "| **pos** | 1 | 2 |" in md


def test_log_outputs_into_kfp_artifacts(tmp_path):
    from kfp.dsl import ClassificationMetrics, Metrics

    m = ev.compute_metrics(Y, S, ["neg", "pos"])
    metrics, cm = Metrics(uri=str(tmp_path / "m")), ClassificationMetrics(uri=str(tmp_path / "c"))
    passed = ev.log_outputs(m, metrics, cm, str(tmp_path / "report.md"), 0.6)
    assert passed is True
    assert metrics.metadata["accuracy"] == pytest.approx(4 / 6)
    assert metrics.metadata["roc_auc"] == pytest.approx(8 / 9)
    assert cm.metadata["confusionMatrix"]["rows"] == [{"row": [2, 1]}, {"row": [1, 2]}]
    assert len(cm.metadata["confidenceMetrics"]) == len(m["roc"]["fpr"])
    assert "**PASS**" in (tmp_path / "report.md").read_text()
    # a NaN AUC (one class only) is left out rather than logged
    one = ev.compute_metrics(np.array([1, 1]), np.array([0.7, 0.2]))
    metrics2 = Metrics(uri=str(tmp_path / "m2"))
    assert ev.log_outputs(one, metrics2, ClassificationMetrics(uri=str(tmp_path / "c2")),
                          str(tmp_path / "r2.md"), 0.6) is False
    assert "roc_auc" not in metrics2.metadata


def test_predict_refuses_an_empty_dataset_before_loading_a_model(tmp_path):
    """Keras' predict fails on zero rows with an UnboundLocalError; say what is wrong."""
    from kfp_gpu.training import datasets

    path = tmp_path / "empty"
    datasets.save(np.zeros((0, 80), np.int32), np.zeros((0,), np.int32), path)
    with pytest.raises(ValueError, match="has no examples"):
        ev.predict(str(tmp_path / "no-model-here"), str(path))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ev.predict(str(tmp_path / "no-model-here"), str(path), batch_size=0)
