"""evaluate_classifier's HTML report: one self-contained page for the KFP UI.

The page (``dsl.Output[HTML]``, shown by the KFP UI's visualization tab; the UI renders
an HTML artifact's file as is, so everything is inline) holds the metrics, the confusion
matrix, the ROC and precision/recall curves, the training curves (loss and accuracy per
epoch), the run's parameters and throughput, and the most confidently misclassified
examples. Plots are matplotlib figures (Agg, no display) embedded as base64 PNG.
:func:`render` is pure (numbers in, HTML out); :func:`read_history` and
:func:`read_training_report` read the training step's artifacts.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path

import numpy as np

METRIC_ROWS = ("accuracy", "precision", "recall", "f1", "roc_auc", "average_precision",
               "loss", "rows")
#: Test-Dataset sidecar keys shown under "Data" (prep_text's settings and statistics).
DATA_KEYS = ("rows", "maxlen", "vocabulary_size", "padding", "truncating", "positive_share",
             "truncated_share", "mean_tokens", "feature_shape", "source")
#: Training-report keys shown under "Training run" (train_text_classifier's report JSON).
THROUGHPUT_KEYS = ("device", "train_rows", "epochs_run", "seconds_per_epoch", "ms_per_step",
                   "samples_per_sec", "cudnn_eligible", "mixed_precision", "gpu_share")
CSS = """body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}
h1{margin-bottom:4px} table{border-collapse:collapse;margin:8px 0 16px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .pass{color:#176f2c} .fail{color:#b00020}
figure{display:inline-block;margin:0 8px 8px 0} figcaption{font-size:90%;color:#555}
.grid{display:flex;flex-wrap:wrap;gap:0 24px;align-items:flex-start} td.text{max-width:640px;font-size:90%}"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(title: str, draw, size=(4.3, 3.5)) -> str:
    """A ``<figure>`` with the PNG drawn by ``draw(fig)``; ``title`` is its alt and caption."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    draw(fig)
    return (f'<figure><img alt="{html.escape(title)}" title="{html.escape(title)}" '
            f'src="data:image/png;base64,{_png(fig)}"><figcaption>{html.escape(title)}'
            "</figcaption></figure>")


def _curve(x, y, xlabel, ylabel, label, diagonal=False):
    def draw(fig):
        ax = fig.add_subplot()
        ax.plot(x, y, lw=2, label=label)
        if diagonal:
            ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=1, label="chance")
        ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(0, 1), ylim=(0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right" if diagonal else "lower left")
    return draw


def _confusion(classes: list[str], cm: list[list[int]]):
    def draw(fig):
        ax = fig.add_subplot()
        a = np.asarray(cm)
        ax.imshow(a, cmap="Blues")
        ticks = range(len(classes))
        ax.set(xticks=ticks, yticks=ticks, xticklabels=classes, yticklabels=classes,
               xlabel="predicted", ylabel="true")
        for (i, j), v in np.ndenumerate(a):
            ax.text(j, i, str(v), ha="center", va="center",
                    color="white" if v > a.max() / 2 else "black")
    return draw


def _training(history: list[dict]):
    epochs = [h["epoch"] for h in history]

    def draw(fig):
        for k, key in enumerate(("loss", "accuracy")):
            ax = fig.add_subplot(1, 2, k + 1)
            ax.plot(epochs, [h.get(key) for h in history], marker="o", lw=2)
            ax.set(xlabel="epoch", ylabel=f"training {key}", title=key)
            ax.set_xticks(epochs)
            ax.grid(alpha=0.3)
    return draw


def _fmt(v) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, dict):
        return "; ".join(f"{html.escape(str(k))}: {_fmt(x)}" for k, x in v.items()
                         if x is not None)
    return html.escape(str(v))


def _table(rows, header=None, attrs="") -> str:
    head = ("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"
            if header else "")
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table {attrs}>{head}{body}</table>"


def misclassified(y_true: np.ndarray, y_score: np.ndarray, classes: list[str],
                  k: int = 8) -> list[dict]:
    """The ``k`` most confidently wrong predictions, most confident first.

    Returns:
        dicts with ``row`` (index in the test Dataset), ``true``/``predicted`` (class
        names) and ``score`` (binary: P(class 1); multi-class: the predicted class'
        probability).
    """
    y_true = np.asarray(y_true)
    if y_score.ndim == 1:
        pred = (y_score >= 0.5).astype(int)
        conf = np.abs(y_score - 0.5)
        score = y_score
    else:
        pred = y_score.argmax(axis=1)
        score = conf = y_score.max(axis=1)
    wrong = np.flatnonzero(pred != y_true)
    top = wrong[np.argsort(-conf[wrong], kind="stable")[:k]]
    return [{"row": int(i), "true": classes[int(y_true[i])], "predicted": classes[int(pred[i])],
             "score": float(score[i])} for i in top]


def _examples_section(examples: list[dict]) -> str:
    if not examples:
        return "<p>No misclassified examples.</p>"
    header = ["row", "true", "predicted", "score", "model input"]
    body = "".join(
        f"<tr><td>{e['row']}</td><td>{html.escape(e['true'])}</td>"
        f"<td>{html.escape(e['predicted'])}</td><td>{e['score']:.4f}</td>"
        f"<td class=text>{html.escape(e.get('text', '')) or '-'}</td></tr>" for e in examples)
    return ("<table id=misclassified><tr>" + "".join(f"<th>{h}</th>" for h in header)
            + f"</tr>{body}</table>")


def _training_section(history: list[dict] | None, training: dict | None,
                      data: dict | None) -> str:
    parts = ["<h2>Training</h2><div class=grid>"]
    if history:
        parts.append(_figure("Training curves", _training(history), size=(7.5, 3.0)))
        parts.append(_table([[h["epoch"], h.get("loss"), h.get("accuracy"), h.get("seconds")]
                             for h in history], ["epoch", "loss", "accuracy", "seconds"],
                            "id=history"))
    else:
        parts.append("<p>No per-epoch history given (training_logs input not connected).</p>")
    parts.append("</div><div class=grid>")
    if training:
        shown = [[k, training[k]] for k in THROUGHPUT_KEYS if training.get(k) is not None]
        parts.append("<div><h3>Run and throughput</h3>"
                     + _table(shown, attrs="id=throughput") + "</div>")
        config = training.get("config") or {}
        if config:
            parts.append("<div><h3>Parameters</h3>"
                         + _table(sorted(config.items()), attrs="id=parameters") + "</div>")
    if data:
        shown = [[k, data[k]] for k in DATA_KEYS if data.get(k) is not None]
        parts.append("<div><h3>Test data</h3>" + _table(shown, attrs="id=data") + "</div>")
    return "".join(parts) + "</div>"


def render(m: dict, *, threshold: float, pr: dict | None = None,
           history: list[dict] | None = None, training: dict | None = None,
           evaluation: dict | None = None, examples: list[dict] | None = None,
           data: dict | None = None, title: str = "Evaluation report") -> str:
    """The report page.

    Args:
        m: :func:`evaluate.compute_metrics` output (``roc`` present for binary models).
        threshold: the accuracy gate.
        pr: :func:`evaluate.pr_points` output (binary models).
        history: per-epoch dicts ``{"epoch", "loss", "accuracy", "seconds"}``.
        training: the training step's report JSON (throughput keys, ``config``).
        evaluation: ``{"seconds", "samples_per_sec"}`` of the prediction pass.
        examples: :func:`misclassified` output, each optionally with ``text``.
        data: the test Dataset's sidecar (kfp_gpu.datasets.read_meta).

    Returns:
        A complete HTML document (str).
    """
    passed = m["accuracy"] >= threshold
    values = {**m, "average_precision": (pr or {}).get("average_precision", math.nan)}
    rows = [[k, values[k]] for k in METRIC_ROWS if k in values]
    figures = [_figure("Confusion matrix", _confusion(m["classes"], m["confusion_matrix"]))]
    if "roc" in m:
        figures.append(_figure("ROC curve", _curve(
            m["roc"]["fpr"], m["roc"]["tpr"], "false positive rate", "true positive rate",
            f"AUC {m['roc_auc']:.4f}", diagonal=True)))
    if pr:
        figures.append(_figure("Precision/recall curve", _curve(
            pr["recall"], pr["precision"], "recall", "precision",
            f"AP {pr['average_precision']:.4f}")))
    cm = _table([[f"true {c}", *r] for c, r in zip(m["classes"], m["confusion_matrix"])],
                ["", *[f"predicted {c}" for c in m["classes"]]], "id=confusion-matrix")
    ev = ""
    if evaluation:
        ev = (f" Prediction: {evaluation['seconds']:.1f} s, "
              f"{evaluation['samples_per_sec']:,.0f} samples/sec.")
    gate = (f"<span class={'pass' if passed else 'fail'}>{'PASS' if passed else 'FAIL'}"
            f"</span>: accuracy {m['accuracy']:.4f} {'>=' if passed else '<'} {threshold}")
    return (f"<!DOCTYPE html><html><head><meta charset=utf-8><title>{html.escape(title)}"
            f"</title><style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
            f"<p>{gate}. {m['rows']:,} test examples.{ev}</p>"
            f"<h2>Metrics</h2><div class=grid>{_table(rows, ['metric', 'value'], 'id=metrics')}"
            f"{cm}</div>"
            f"<div class=grid>{''.join(figures)}</div>"
            f"{_training_section(history, training, data)}"
            f"<h2>Most confidently misclassified</h2>{_examples_section(examples or [])}"
            "</body></html>\n")


def read_training_report(path: str | None) -> dict | None:
    """The training step's report JSON, or None (no path, no file, not JSON)."""
    if not path:
        return None
    f = Path(path)
    try:
        return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None
    except ValueError:
        return None


def read_history(logs_dir: str | None) -> list[dict] | None:
    """Per-epoch ``loss``/``accuracy`` from a Keras TensorBoard log directory.

    Reads the ``epoch_loss`` / ``epoch_accuracy`` scalars the Keras TensorBoard callback
    writes under ``<logs_dir>/train`` (keras ``keras/src/callbacks/tensorboard.py``,
    ``_log_epoch_metrics``; step = epoch index from 0); a resumed run's later files win.

    Returns:
        ``[{"epoch": 1, "loss": float, "accuracy": float}, ...]``, or None if none found.
    """
    if not logs_dir or not (Path(logs_dir) / "train").is_dir():
        return None
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    epochs: dict[int, dict] = {}
    for f in sorted((Path(logs_dir) / "train").glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(f)).as_numpy_iterator():
            event = event_pb2.Event.FromString(record)
            for v in event.summary.value:
                key = v.tag.removeprefix("epoch_")
                if v.tag.startswith("epoch_") and key in ("loss", "accuracy"):
                    value = (float(tf.make_ndarray(v.tensor)) if v.HasField("tensor")
                             else float(v.simple_value))
                    epochs.setdefault(int(event.step) + 1, {})[key] = value
    return [{"epoch": e, **epochs[e]} for e in sorted(epochs)] or None


def decode(ids: np.ndarray, vocabulary: list[str]) -> str:
    """Token ids ``[maxlen]`` back to the words the model saw (padding dropped)."""
    return " ".join(vocabulary[i] if i < len(vocabulary) else "[?]" for i in ids.tolist() if i)


def write(path: str, m: dict, y_true: np.ndarray, y_score: np.ndarray, *, threshold: float,
          dataset_path: str, training_report_path: str | None = None,
          training_logs_path: str | None = None, vocabulary_path: str | None = None,
          predict_seconds: float | None = None) -> str:
    """Gather the report's inputs from the artifacts, :func:`render`, write ``path``
    atomically; returns the HTML.

    Misclassified text examples are decoded from the test Dataset's token ids with the
    vocabulary (what the model saw: lower case, no punctuation, the last maxlen tokens,
    ``[UNK]`` for words outside the vocabulary); without a vocabulary only their row,
    classes and score are shown.
    """
    from kfp_gpu.components.shared import evaluate as ev
    from kfp_gpu.inputs import storage
    from kfp_gpu.training import datasets

    binary = y_score.ndim == 1 and "roc" in m
    pr = ev.pr_points(y_true, y_score) if binary else None
    training = read_training_report(training_report_path)
    history = read_history(training_logs_path)
    if history and training and training.get("epoch_seconds"):
        first = int(training.get("resumed_from_epoch") or 0) + 1
        seconds = dict(enumerate(training["epoch_seconds"], start=first))
        for h in history:
            h["seconds"] = seconds.get(h["epoch"])
    examples = misclassified(y_true, y_score, m["classes"])
    if examples and vocabulary_path and Path(vocabulary_path).is_file():
        # prep_text's vocabulary artifact: UTF-8, token id i on line i
        vocab = Path(vocabulary_path).read_text(encoding="utf-8").rstrip("\n").split("\n")
        features = datasets.load_arrays(dataset_path)[0]
        if features.ndim == 2 and features.dtype.kind in "iu":
            for e in examples:
                e["text"] = decode(features[e["row"]], vocab)
    evaluation = None
    if predict_seconds:
        evaluation = {"seconds": predict_seconds, "samples_per_sec": m["rows"] / predict_seconds}
    page = render(m, threshold=threshold, pr=pr, history=history, training=training,
                  evaluation=evaluation, examples=examples, data=datasets.read_meta(dataset_path))
    storage.write_text(path, page)
    return page
