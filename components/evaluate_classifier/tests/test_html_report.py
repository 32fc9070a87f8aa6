"""evaluate_classifier's HTML report: plots present, numbers equal to the metrics artifact,
training curves from real TensorBoard logs, misclassified reviews decoded."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from kfp_gpu.components.evaluate_classifier import html_report as hr
from kfp_gpu.components.shared import evaluate as ev
from kfp_gpu.training import datasets


class Page(HTMLParser):
    """Images (alt -> src) and tables (id -> rows of cell texts) of an HTML page."""

    def __init__(self, text: str):
        super().__init__()
        self.images, self.tables, self._table, self._row, self._cell = {}, {}, None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images[a.get("alt")] = a.get("src", "")
        elif tag == "table":
            self._table = self.tables.setdefault(a.get("id"), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def fake_run(tmp_path, n=400):
    """A test Dataset of token ids, a vocabulary, scores, and a training report."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, n)
    s = np.clip(0.5 + (y - 0.5) * rng.random(n) + rng.normal(0, 0.25, n), 0, 1)
    vocab = ["", "[UNK]", "good", "bad", "film", "plot"]
    x = rng.integers(0, len(vocab), (n, 6)).astype(np.int32)
    x[:, :2] = 0
    datasets.save(x, y, tmp_path / "test", {"classes": ["negative", "positive"]})
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    report = {"device": "CPU", "train_rows": 2000, "epochs_run": 2, "seconds_per_epoch": 12.5,
              "samples_per_sec": 160.0, "ms_per_step": 200.0, "epoch_seconds": [13.0, 12.0],
              "resumed_from_epoch": 0, "config": {"batch_size": 32, "lstm_units": 128}}
    (tmp_path / "report.json").write_text(json.dumps(report))
    return x, y.astype(np.int32), s.astype(np.float32), vocab


def test_report_plots_and_numbers_match_metrics_artifact(tmp_path):
    from kfp.dsl import ClassificationMetrics, Metrics

    x, y, s, vocab = fake_run(tmp_path)
    m = ev.compute_metrics(y, s, ["negative", "positive"])
    metrics = Metrics(uri=str(tmp_path / "m"))
    ev.log_outputs(m, metrics, ClassificationMetrics(uri=str(tmp_path / "c")),
                   str(tmp_path / "r.md"), 0.6)
    hr.write(str(tmp_path / "report.html"), m, y, s, threshold=0.6,
             dataset_path=str(tmp_path / "test"), vocabulary_path=str(tmp_path / "vocab.txt"),
             training_report_path=str(tmp_path / "report.json"), predict_seconds=2.0)
    text = (tmp_path / "report.html").read_text()
    page = Page(text)
    for alt in ("Confusion matrix", "ROC curve", "Precision/recall curve"):
        assert page.images[alt].startswith("data:image/png;base64,iVBOR"), alt
    assert "Training curves" not in page.images  # no TensorBoard logs given
    values = dict(r for r in page.tables["metrics"][1:])
    for key in ("accuracy", "roc_auc", "precision", "recall", "f1", "loss"):
        assert float(values[key]) == pytest.approx(metrics.metadata[key], abs=5e-5), key
    assert int(values["rows"].replace(",", "")) == metrics.metadata["rows"] == 400
    cm = [[int(v) for v in r[1:]] for r in page.tables["confusion-matrix"][1:]]
    assert cm == m["confusion_matrix"]
    throughput = dict(r for r in page.tables["throughput"])
    assert throughput["samples_per_sec"] == "160.0" and throughput["device"] == "CPU"
    assert ["lstm_units", "128"] in page.tables["parameters"]
    assert "200 samples/sec" in text  # 400 rows predicted in 2.0 s
    wrong = page.tables["misclassified"][1:]
    assert 1 <= len(wrong) <= 8
    for row, true, pred, score, words in wrong:
        i = int(row)
        assert true != pred and true == ["negative", "positive"][y[i]]
        assert float(score) == pytest.approx(s[i], abs=5e-5)
        assert words == " ".join(vocab[t] for t in x[i] if t)
    assert not re.search(r"src=\"(?!data:)", text)  # self-contained: no external files


def test_misclassified_most_confident_first():
    y = np.array([0, 0, 1, 1, 0])
    s = np.array([0.9, 0.6, 0.05, 0.8, 0.2])
    got = hr.misclassified(y, s, ["n", "p"])
    assert [e["row"] for e in got] == [2, 0, 1]  # |s - 0.5|: 0.45, 0.4, 0.1
    multi = hr.misclassified(np.array([0, 1]), np.array([[0.2, 0.8], [0.3, 0.7]]), ["a", "b"])
    assert multi == [{"row": 0, "true": "a", "predicted": "b", "score": 0.8}]


def test_training_curves_from_real_keras_tensorboard_logs(tmp_path):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile("sgd", "binary_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    xs, ys = rng.random((64, 4)), rng.integers(0, 2, 64)
    h = model.fit(xs, ys, epochs=3, verbose=0,
                  callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "tb"))])
    history = hr.read_history(str(tmp_path / "tb"))
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert [e["loss"] for e in history] == pytest.approx(h.history["loss"], rel=1e-5)
    assert [e["accuracy"] for e in history] == pytest.approx(h.history["accuracy"], rel=1e-5)
    assert hr.read_history(str(tmp_path / "missing")) is None
    m = ev.compute_metrics(np.array([0, 1]), np.array([0.2, 0.9]))
    page = Page(hr.render(m, threshold=0.5, history=history))
    assert page.images["Training curves"].startswith("data:image/png;base64,")
    assert [r[0] for r in page.tables["history"][1:]] == ["1", "2", "3"]
