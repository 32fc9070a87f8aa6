"""prep_text: sources, formats, splitting, tokenisation, and every bad-input error."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from kfp_gpu.components.prep_text import prep, tokens
from kfp_gpu.training import datasets

POS = ["a wonderful moving film", "great acting and a great story", "i loved it <br />truly"]
NEG = ["a dull boring mess", "terrible plot and bad acting", "i hated it"]


def table(n: int = 4) -> pd.DataFrame:
    rows = [(t, "positive") for t in POS * n] + [(t, "negative") for t in NEG * n]
    return pd.DataFrame(rows, columns=["review", "sentiment"])


def run(tmp_path, source, **kw):
    return prep.run(source=str(source), train_path=str(tmp_path / "train"),
                    test_path=str(tmp_path / "test"), vocabulary_path=str(tmp_path / "v.txt"),
                    **kw)


@pytest.mark.parametrize("name,writer", [
    ("d.csv", lambda df, p: df.to_csv(p, index=False)),
    ("d.csv.gz", lambda df, p: df.to_csv(p, index=False, compression="gzip")),
    ("d.jsonl", lambda df, p: df.to_json(p, orient="records", lines=True)),
    ("d.jsonl.gz", lambda df, p: df.to_json(p, orient="records", lines=True,
                                            compression="gzip")),
    ("d.parquet", lambda df, p: df.to_parquet(p)),
])
def test_formats_and_seeded_fraction_split(tmp_path, name, writer):
    writer(table(), tmp_path / name)
    stats = run(tmp_path, tmp_path / name, split_column="", test_fraction=0.25, maxlen=6)
    assert stats["train"]["rows"] == 18 and stats["test"]["rows"] == 6
    x, y = datasets.load_arrays(tmp_path / "train")
    assert x.shape == (18, 6) and x.dtype == np.int32 and set(y) == {0, 1}
    # same seed -> same split; different seed -> a different one
    again = run(tmp_path / "again", tmp_path / name, split_column="", test_fraction=0.25,
                maxlen=6)
    assert np.array_equal(datasets.load_arrays(tmp_path / "again" / "test")[1],
                          datasets.load_arrays(tmp_path / "test")[1])
    assert again == {**stats, "source": again["source"]}


def test_pre_padding_keeps_last_tokens_and_vocab_fit_on_train_only(tmp_path):
    df = pd.DataFrame({
        "review": ["one two three four five six", "alpha beta", "zebra", "one alpha"],
        "sentiment": ["positive", "negative", "positive", "negative"],
        "split": ["train", "train", "test", "test"],
    })
    df.to_csv(tmp_path / "d.csv", index=False)
    stats = run(tmp_path, tmp_path / "d.csv", maxlen=4)
    vocab = prep.read_vocabulary(tmp_path / "v.txt")
    assert vocab[:2] == ["", "[UNK]"] and "zebra" not in vocab  # test-only word
    x, y = datasets.load_arrays(tmp_path / "train")
    assert y.tolist() == [1, 0]
    ids = {w: i for i, w in enumerate(vocab)}
    assert x[0].tolist() == [ids["three"], ids["four"], ids["five"], ids["six"]]
    assert x[1].tolist() == [0, 0, ids["alpha"], ids["beta"]]
    xt, _ = datasets.load_arrays(tmp_path / "test")
    assert xt[0].tolist() == [0, 0, 0, 1]  # zebra -> OOV
    assert stats["train"]["truncated_share"] == 0.5
    assert stats["train"]["positive_share"] == 0.5
    meta = datasets.read_meta(tmp_path / "train")
    assert meta["padding"] == "pre" and meta["vocabulary_size"] == len(vocab)


def test_html_breaks_removed():
    assert tokens.clean(np.array(["a<br />b<BR>c"], dtype=object)).to_pylist() == ["a b c"]


def test_real_imdb_subset(imdb_small):
    s = imdb_small["stats"]
    assert s["train"]["rows"] == 2000 and s["test"]["rows"] == 2000
    assert 0.4 < s["train"]["positive_share"] < 0.6
    assert s["vocabulary_size"] == 10000
    # IMDB reviews average ~230 words: most exceed maxlen 80
    assert 0.6 < s["train"]["truncated_share"] < 0.95
    x, y = datasets.load_arrays(imdb_small["train"])
    assert x.shape == (2000, 80) and x.max() < 10000
    assert y.mean() == s["train"]["positive_share"]


def test_gcs_source(tmp_path):
    from google.cloud import storage as gcs

    from kfp_gpu.inputs import storage
    from tests.support import gcs_emulator

    table().to_csv(tmp_path / "d.csv.gz", index=False, compression="gzip")
    with gcs_emulator.running() as bucket:
        storage.upload(tmp_path / "d.csv.gz", f"gs://{bucket}/in/d.csv.gz")
        stats = run(tmp_path, f"gs://{bucket}/in/d.csv.gz", split_column="", maxlen=5)
        assert stats["train"]["rows"] + stats["test"]["rows"] == 24
        with pytest.raises(FileNotFoundError, match="gs://"):
            run(tmp_path, f"gs://{bucket}/in/missing.csv")
        storage.upload(tmp_path / "train", f"gs://{bucket}/out/train")
        names = sorted(b.name for b in storage._client().list_blobs(bucket, prefix="out/"))
        assert "out/train/dataset.json" in names
        assert isinstance(storage._client(), gcs.Client)


def test_s3_source_through_the_component_function(tmp_path):
    """The real IMDB table's first rows as a CSV.gz on a real S3 server (moto, loopback),
    read by the component's own code path (prep.run -> storage.local_copy) with the
    endpoint and keys from the AWS variables only."""
    import pandas as pd

    from kfp_gpu.inputs import datadir, storage
    from tests.support import s3_server

    real = pd.read_csv(datadir.find("imdb/imdb_50k.csv.gz")).sample(400, random_state=0)
    real.to_csv(tmp_path / "imdb.csv.gz", index=False, compression="gzip")
    with s3_server.running("reviews") as (bucket, _):
        storage.upload(tmp_path / "imdb.csv.gz", f"s3://{bucket}/imdb/imdb.csv.gz")
        # a sample of both splits: hold out a seeded fraction instead of the split column
        stats = run(tmp_path / "out", f"s3://{bucket}/imdb/imdb.csv.gz", maxlen=20,
                    split_column="", test_fraction=0.25)
        with pytest.raises(FileNotFoundError, match=f"s3://{bucket}/imdb/missing.csv.gz"):
            run(tmp_path / "out2", f"s3://{bucket}/imdb/missing.csv.gz")
        storage.upload(tmp_path / "out" / "train", f"s3://{bucket}/out/train")
        storage.download_dir(f"s3://{bucket}/out/train", tmp_path / "back")
    assert stats["train"]["rows"] + stats["test"]["rows"] == len(real)
    assert stats["test"]["rows"] == pytest.approx(len(real) * 0.25, abs=1)
    x, y = datasets.load_arrays(tmp_path / "back")
    x0, y0 = datasets.load_arrays(tmp_path / "out" / "train")
    assert x.shape == (stats["train"]["rows"], 20) and np.array_equal(x, x0)
    assert np.array_equal(y, y0)
    assert y.mean() == pytest.approx(stats["train"]["positive_share"], abs=1e-4)  # rounded


# ---- bad input: clear errors naming the problem --------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        run(tmp_path, tmp_path / "nope.csv")


def test_unknown_format(tmp_path):
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(ValueError, match="accepted suffixes"):
        run(tmp_path, tmp_path / "d.txt")


def test_missing_column(tmp_path):
    table().to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"text_column 'text' not found.*review"):
        run(tmp_path, tmp_path / "d.csv", text_column="text")
    with pytest.raises(ValueError, match=r"label_column 'label' not found"):
        run(tmp_path, tmp_path / "d.csv", label_column="label")


def test_empty_text(tmp_path):
    df = table()
    df.loc[3, "review"] = "   "
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"1 rows have empty text.*\[3\]"):
        run(tmp_path, tmp_path / "d.csv")


def test_label_outside_classes(tmp_path):
    df = table()
    df.loc[0, "sentiment"] = "neutral"
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"outside the declared classes.*neutral"):
        run(tmp_path, tmp_path / "d.csv")


def test_fewer_than_two_classes(tmp_path):
    df = table()
    df["split"] = np.where(df.sentiment == "positive", "train", "test")
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match="fewer than 2 classes"):
        run(tmp_path, tmp_path / "d.csv")


def test_bad_split_values(tmp_path):
    df = table()
    df["split"] = "validation"
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"accepted: \['train', 'test'\]"):
        run(tmp_path, tmp_path / "d.csv")


def test_undecodable_bytes(tmp_path):
    raw = b"review,sentiment\n" + b"caf\xe9 \xff\xfe bad,positive\nok,negative\n"
    (tmp_path / "d.csv.gz").write_bytes(gzip.compress(raw))
    with pytest.raises(ValueError, match="undecodable bytes.*UTF-8"):
        run(tmp_path, tmp_path / "d.csv.gz")
    (tmp_path / "d.jsonl").write_bytes(json.dumps({"review": "x"}).encode() + b"\xff\n")
    with pytest.raises(ValueError, match="undecodable bytes|cannot parse"):
        run(tmp_path, tmp_path / "d.jsonl")


@pytest.mark.parametrize("kw,msg", [({"maxlen": 0}, "maxlen"), ({"num_words": 2}, "num_words"),
                                    ({"split_column": "", "test_fraction": 1.0},
                                     "test_fraction")])
def test_bad_parameters(tmp_path, kw, msg):
    table().to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=msg):
        run(tmp_path, tmp_path / "d.csv", **kw)


def test_keras_imdb_source_decodes_word_indices(tmp_path, monkeypatch):
    """keras:imdb: Keras' word indices (offset 3: 0 pad, 1 start, 2 OOV) back to words.

    The download itself needs the internet; keras.datasets.imdb's two calls are replaced
    by the same shapes Keras returns, so the decoding and the whole prep path run.
    """
    from keras.datasets import imdb

    index = {"great": 1, "film": 2, "awful": 3, "plot": 4}
    ids = {w: i + 3 for w, i in index.items()}
    train = np.array([[1, ids["great"], ids["film"]], [1, ids["awful"], 2, ids["plot"]]] * 3,
                     dtype=object)
    test = np.array([[1, ids["great"], ids["plot"]], [1, ids["awful"], ids["film"]]],
                    dtype=object)
    monkeypatch.setattr(imdb, "load_data", lambda **kw: ((train, np.array([1, 0] * 3)),
                                                         (test, np.array([1, 0]))))
    monkeypatch.setattr(imdb, "get_word_index", lambda **kw: index)
    df = prep.load_keras_imdb()
    assert df.review.tolist()[:2] == ["great film", "awful plot"]  # start/OOV markers dropped
    assert df.sentiment.tolist()[:2] == ["positive", "negative"]
    assert df.split.value_counts().to_dict() == {"train": 6, "test": 2}
    stats = run(tmp_path, prep.KERAS_IMDB, maxlen=4)
    assert stats["train"]["rows"] == 6 and stats["test"]["rows"] == 2
    assert set(prep.read_vocabulary(tmp_path / "v.txt")[2:]) == {"great", "film", "awful", "plot"}


def test_keras_imdb_without_internet_says_what_to_do(monkeypatch):
    from keras.datasets import imdb

    def offline(**kw):
        raise OSError("URL fetch failure")

    monkeypatch.setattr(imdb, "load_data", offline)
    with pytest.raises(ValueError, match="give source= a table the pod can read") as e:
        prep.load_keras_imdb()
    text = str(e.value)
    # what a pod can use, with the compile options that give it access; no checkout path
    for needed in ("URL fetch failure", "s3://", "--secret-env", "gs://", "--pvc"):
        assert needed in text
    assert "shared" not in text and "../" not in text
