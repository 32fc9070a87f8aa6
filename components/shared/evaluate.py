"""evaluate_classifier logic: predictions -> metrics, confusion matrix, ROC, report.

:func:`predict` is the only TensorFlow part; :func:`compute_metrics` is pure numpy /
scikit-learn, so that predictions gathered from several shards (fractional-eval) give
exactly the metrics of one pass over the whole set.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kfp_gpu.inputs import checks, errors
from kfp_gpu.training import datasets

MODEL_FILE = "model.keras"
#: Cap on the ROC / precision-recall points written for the KFP UI and the report.
MAX_CURVE_POINTS = 200
MAX_ROC_POINTS = MAX_CURVE_POINTS


def load_model(model_path: str):
    """A Keras model from a Model artifact directory (``model.keras`` inside) or a file.

    Raises:
        kfp_gpu.inputs.errors.NotAModel: no ``model.keras`` there, a file that is not a
            ``.keras`` archive, or one Keras cannot load (``input``: ``model_path``).
    """
    import keras

    checks.check_model(model_path, MODEL_FILE)
    f = Path(model_path) / MODEL_FILE if Path(model_path).is_dir() else Path(model_path)
    try:
        return keras.saving.load_model(f)
    except (ValueError, OSError, KeyError) as e:
        raise errors.NotAModel(f"{f} is not a Keras model Keras can load: "
                               f"{type(e).__name__}: {e}", model_path) from e


def predict(model_path: str, dataset_path: str, batch_size: int = 256):
    """Labels and scores of every example of a Dataset.

    Returns:
        ``(y_true int32 [N], y_score float32)``: ``y_score`` is ``[N]`` (probability of
        class 1) for a one-unit sigmoid model, else ``[N, C]`` class probabilities.

    Raises:
        ValueError: ``batch_size < 1`` or an empty Dataset (checked before the model loads).
        FileNotFoundError: ``dataset_path`` is not a Dataset.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    # the arrays straight from the files (not the labels read back through a tf.data
    # iterator, one Python object per row); Keras batches the features
    features, y_true = datasets.load_arrays(dataset_path)
    if len(y_true) == 0:
        raise ValueError(f"Dataset {dataset_path} has no examples to evaluate")
    model = load_model(model_path)
    scores = model.predict(features, batch_size=batch_size, verbose=0).astype(np.float32)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    return y_true, scores


def compute_metrics(y_true: np.ndarray, y_score: np.ndarray,
                    class_names: list[str] | None = None) -> dict:
    """Classification metrics of labels and scores.

    Args:
        y_true: int ``[N]`` class ids.
        y_score: float ``[N]`` (binary: probability of class 1, threshold 0.5) or
            ``[N, C]`` class probabilities (multi-class: argmax).
        class_names: names of the C classes (default ``"0" .. "C-1"``).

    Returns:
        dict with ``accuracy``, ``precision``, ``recall``, ``f1`` (binary: of class 1;
        multi-class: macro averages), ``roc_auc`` (binary; multi-class one-vs-rest macro;
        NaN if a class is missing), ``loss`` (cross-entropy, nats), ``confusion_matrix``
        (``[C][C]``, rows = true class), ``classes``, ``rows``, and for binary input
        ``roc`` = ``{"fpr", "tpr", "thresholds"}`` (at most 200 points, thresholds in
        [0, 1]).

    Raises:
        ValueError: empty input, mismatched lengths, or a label >= C.
    """
    from sklearn import metrics as skm

    y_true = np.asarray(y_true).astype(np.int64)
    y_score = np.asarray(y_score, dtype=np.float64)
    if len(y_true) == 0:
        raise ValueError("no examples to evaluate")
    if len(y_true) != len(y_score):
        raise ValueError(f"{len(y_true)} labels but {len(y_score)} scores")
    binary = y_score.ndim == 1
    n_classes = 2 if binary else y_score.shape[1]
    if y_true.min() < 0 or y_true.max() >= n_classes:
        raise ValueError(f"labels must be in [0, {n_classes}), got max {y_true.max()}")
    names = list(class_names) if class_names else [str(i) for i in range(n_classes)]
    if len(names) != n_classes:
        raise ValueError(f"{len(names)} class names for {n_classes} classes")
    eps = 1e-7
    if binary:
        y_pred = (y_score >= 0.5).astype(np.int64)
        p = np.clip(y_score, eps, 1 - eps)
        loss = float(-np.mean(y_true * np.log(p) + (1 - y_true) * np.log(1 - p)))
        prec, rec, f1, _ = skm.precision_recall_fscore_support(
            y_true, y_pred, average="binary", pos_label=1, zero_division=0)
        auc = (float(skm.roc_auc_score(y_true, y_score)) if len(np.unique(y_true)) == 2
               else math.nan)
    else:
        y_pred = y_score.argmax(axis=1)
        p = np.clip(y_score[np.arange(len(y_true)), y_true], eps, 1.0)
        loss = float(-np.mean(np.log(p)))
        prec, rec, f1, _ = skm.precision_recall_fscore_support(
            y_true, y_pred, average="macro", labels=list(range(n_classes)), zero_division=0)
        present = np.unique(y_true)
        auc = (float(skm.roc_auc_score(y_true, y_score / y_score.sum(axis=1, keepdims=True),
                                       multi_class="ovr", average="macro",
                                       labels=list(range(n_classes))))
               if len(present) == n_classes else math.nan)
    out = {
        "rows": len(y_true),
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "precision": float(prec),
        "recall": float(rec),
        "f1": float(f1),
        "roc_auc": auc,
        "loss": loss,
        "classes": names,
        "confusion_matrix": skm.confusion_matrix(
            y_true, y_pred, labels=list(range(n_classes))).tolist(),
    }
    if binary and not math.isnan(auc):
        out["roc"] = roc_points(y_true, y_score)
    return out


def _thin(n: int, cap: int = MAX_CURVE_POINTS) -> np.ndarray:
    """At most ``cap`` indices evenly spread over ``0 .. n-1``, both ends kept."""
    return np.unique(np.linspace(0, n - 1, min(n, cap)).round().astype(int))


def roc_points(y_true: np.ndarray, y_score: np.ndarray) -> dict:
    """ROC curve (fpr, tpr, thresholds), at most 200 points, thresholds within [0, 1].

    scikit-learn (sklearn/metrics/_ranking.py, ``roc_curve``) starts the curve at
    (0, 0) with threshold +inf (nothing predicted positive); probabilities never exceed
    1, so that point is written with threshold 1.0, and every threshold is clipped to
    [0, 1], the range the KFP UI's ROC view (ClassificationMetrics) expects. Points are
    thinned evenly along the curve (first and last kept) after ``drop_intermediate``.
    """
    from sklearn import metrics as skm

    fpr, tpr, thr = skm.roc_curve(y_true, y_score, drop_intermediate=True)
    idx = _thin(len(fpr))
    thr = np.clip(np.nan_to_num(thr[idx], posinf=1.0, neginf=0.0), 0.0, 1.0)
    return {"fpr": fpr[idx].tolist(), "tpr": tpr[idx].tolist(), "thresholds": thr.tolist()}


def pr_points(y_true: np.ndarray, y_score: np.ndarray) -> dict:
    """Precision/recall curve of the positive class, at most 200 points, thresholds in
    [0, 1], plus ``average_precision`` (sklearn ``average_precision_score``).

    scikit-learn's last point (precision 1, recall 0) has no threshold; it is given 1.0.
    """
    from sklearn import metrics as skm

    prec, rec, thr = skm.precision_recall_curve(y_true, y_score, drop_intermediate=True)
    thr = np.clip(np.append(thr, 1.0), 0.0, 1.0)
    idx = _thin(len(prec))
    return {"precision": prec[idx].tolist(), "recall": rec[idx].tolist(),
            "thresholds": thr[idx].tolist(),
            "average_precision": float(skm.average_precision_score(y_true, y_score))}


def markdown_report(m: dict, threshold: float) -> str:
    """A Markdown summary of :func:`compute_metrics` output and the accuracy gate."""
    passed = m["accuracy"] >= threshold
    lines = [
        "# Evaluation",
        "",
        (f"Examples: {m['rows']}. Gate: accuracy {m['accuracy']:.4f} "
         f"{'>=' if passed else '<'} {threshold} -> **{'PASS' if passed else 'FAIL'}**."),
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for k in ("accuracy", "precision", "recall", "f1", "roc_auc", "loss"):
        lines.append(f"| {k} | {m[k]:.4f} |")
    lines += ["", "Confusion matrix (rows: true class, columns: predicted):", "",
              "| | " + " | ".join(m["classes"]) + " |",
              "|---" * (len(m["classes"]) + 1) + "|"]
    for name, row in zip(m["classes"], m["confusion_matrix"]):
        lines.append(f"| **{name}** | " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def class_names_for(dataset_path: str, n_classes: int) -> list[str]:
    """Class names from the Dataset's sidecar (``classes``), else ``"0" ..``."""
    names = datasets.read_meta(dataset_path).get("classes")
    if names and len(names) == n_classes:
        return [str(n) for n in names]
    return [str(i) for i in range(n_classes)]


SCALARS = ("accuracy", "precision", "recall", "f1", "roc_auc", "loss", "rows")


def log_outputs(m: dict, metrics, classification_metrics, report_path: str,
                threshold: float) -> bool:
    """Write :func:`compute_metrics` output into KFP artifacts; returns the accuracy gate.

    ``metrics`` (kfp ``Metrics``) gets the scalar metrics (NaN ones left out),
    ``classification_metrics`` (kfp ``ClassificationMetrics``) the confusion matrix and,
    for binary models, the ROC curve; ``report_path`` the Markdown report (atomically).
    """
    from kfp_gpu.inputs import storage

    for key in SCALARS:
        if not (isinstance(m[key], float) and math.isnan(m[key])):
            metrics.log_metric(key, float(m[key]))
    classification_metrics.log_confusion_matrix(m["classes"], m["confusion_matrix"])
    if "roc" in m:
        classification_metrics.log_roc_curve(m["roc"]["fpr"], m["roc"]["tpr"],
                                             m["roc"]["thresholds"])
    storage.write_text(report_path, markdown_report(m, threshold))
    return bool(m["accuracy"] >= threshold)
