"""prep_text's vectorised tokeniser against the Keras TextVectorization pass it replaced.

The reference below is prep_text's previous implementation, kept verbatim in semantics:
Python ``re`` for the HTML breaks, ``keras.layers.TextVectorization`` (lower case and
punctuation stripped, whitespace split) adapted on the training texts, and
``keras.utils.pad_sequences`` (pre/pre). It runs on real IMDB rows and on edge cases.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from kfp_gpu.components.prep_text import prep, tokens
from kfp_gpu.training import datasets

_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def reference(train_texts, test_texts, num_words: int, maxlen: int):
    """prep_text before the vectorised tokeniser: (vocabulary, ids, lengths) per split."""
    import keras
    import tensorflow as tf

    def clean(texts):
        return np.array([_HTML_BREAK.sub(" ", t) for t in texts], dtype=object)

    train_texts, test_texts = clean(train_texts), clean(test_texts)
    tv = keras.layers.TextVectorization(max_tokens=num_words, output_mode="int", ragged=True,
                                        standardize="lower_and_strip_punctuation")
    tv.adapt(tf.data.Dataset.from_tensor_slices(train_texts.astype(str)).batch(2048))
    out = []
    for texts in (train_texts, test_texts):
        ragged = tv(texts.astype(str))
        ids = keras.utils.pad_sequences(ragged.to_list(), maxlen=maxlen, dtype="int32",
                                        padding="pre", truncating="pre")
        out.append((ids, ragged.row_lengths().numpy()))
    return tv.get_vocabulary(), out


def assert_same(train_texts, test_texts, num_words, maxlen):
    train_texts = np.asarray(train_texts, dtype=object)
    test_texts = np.asarray(test_texts, dtype=object)
    ref_vocab, ((ref_xtr, ref_ltr), (ref_xte, ref_lte)) = reference(
        train_texts, test_texts, num_words, maxlen)
    vocab, ids, lengths = tokens.encode(np.concatenate([train_texts, test_texts]),
                                        fit_rows=len(train_texts), num_words=num_words,
                                        maxlen=maxlen)
    n = len(train_texts)
    assert vocab == ref_vocab
    assert ids.dtype == np.int32 and ids.shape == (len(lengths), maxlen)
    np.testing.assert_array_equal(ids[:n], ref_xtr)
    np.testing.assert_array_equal(ids[n:], ref_xte)
    np.testing.assert_array_equal(lengths[:n], ref_ltr)
    np.testing.assert_array_equal(lengths[n:], ref_lte)
    return vocab, ids


@pytest.fixture(scope="module")
def imdb_rows(imdb_csv):
    df = pd.read_csv(imdb_csv, dtype=str, keep_default_na=False)
    rng = np.random.default_rng(7)
    train = df[df["split"] == "train"]["review"].to_numpy(dtype=object)
    test = df[df["split"] == "test"]["review"].to_numpy(dtype=object)
    return train[rng.permutation(len(train))[:3000]], test[rng.permutation(len(test))[:1000]]


@pytest.mark.parametrize("num_words,maxlen", [(20000, 80), (500, 300)])
def test_identical_to_textvectorization_on_real_imdb_rows(imdb_rows, num_words, maxlen):
    """3,000 + 1,000 real reviews: vocabulary (incl. the tie order at the cut), ids, lengths."""
    vocab, ids = assert_same(*imdb_rows, num_words=num_words, maxlen=maxlen)
    assert len(vocab) == num_words  # the cut falls inside the real vocabulary
    assert (ids[:, -1] > 0).all() and (ids == 1).any()  # no empty review; some OOV


EDGE = [
    "ÉCOLE École ÀB Straße İI ǅ",  # non-ASCII letters keep their case (ASCII-only lower)
    "a\u00a0b c\u2003d e\x1cf g\x85h i\tj\vk\fl\rm\nn",  # only ASCII whitespace splits
    "don't-stop it's (ok) 50% «hi» — “q” ‘x’ a_b 3.5 a/b [UNK] UNK",
    "*** from ****",  # trailing space after stripping: no empty token
    "   leading and trailing   ",
    "<br />one<BR>two<br/>three<br\u00a0/>four<br\u3000>five<bR  / >six<brx>",
    "!!! ... ???",  # nothing left: an empty sequence
    "b a b a c c c d d d",  # ties at equal counts: bytes descending
    "日本語 のテキスト 😀 emoji😀",
]


def test_identical_on_edge_cases():
    _, ids = assert_same(EDGE, EDGE[::-1] + ["zzz unseen"], num_words=12, maxlen=6)
    assert (ids[EDGE.index("!!! ... ???")] == 0).all()


def test_html_break_whitespace_class_is_pythons():
    """PY_WHITESPACE (for RE2) lists exactly the characters Python's ``\\s`` matches."""
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    got = tokens.clean([f"x<br{s}/>y" for s in spaces]).to_pylist()
    assert got == ["x y"] * len(spaces)
    not_space = ["\x1b", "!", "\u180e", "\u200b", "\ufeff"]  # str.isspace() is False
    kept = [f"x<br{s}/>y" for s in not_space]
    assert tokens.clean(kept).to_pylist() == kept


def test_keep_first_is_textvectorization_post_padding():
    vocab, ids, lengths = tokens.encode(["a b c d e", "b c"], fit_rows=2, num_words=10,
                                        maxlen=3, keep="first")
    ix = {w: i for i, w in enumerate(vocab)}
    assert ids.tolist() == [[ix["a"], ix["b"], ix["c"]], [ix["b"], ix["c"], 0]]
    assert lengths.tolist() == [5, 2]


@pytest.mark.parametrize("kw,match", [
    ({"num_words": 2}, "num_words"), ({"maxlen": 0}, "maxlen"), ({"fit_rows": 0}, "fit_rows"),
    ({"keep": "middle"}, "'last' or 'first'"),
])
def test_bad_parameters(kw, match):
    args = {"fit_rows": 1, "num_words": 10, "maxlen": 4, **kw}
    with pytest.raises(ValueError, match=match):
        tokens.encode(["a b"], **args)


def test_prep_task_does_not_import_tensorflow(tmp_path, imdb_csv):
    """prep.run on real reviews in a fresh interpreter: no TensorFlow (or Keras) imported,
    Dataset artifacts readable, and the same ids as the TensorFlow reference."""
    code = f"""
import json, sys
from kfp_gpu.components.prep_text import prep
stats = prep.run(source={str(imdb_csv)!r}, train_path={str(tmp_path / 'train')!r},
                 test_path={str(tmp_path / 'test')!r},
                 vocabulary_path={str(tmp_path / 'vocab.txt')!r},
                 max_rows_per_split=300, num_words=2000, maxlen=40)
print(json.dumps({{"tf": sorted(m for m in sys.modules
                                if m.split(".")[0] in ("tensorflow", "keras")),
                   "rows": stats["train"]["rows"]}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"tf": [], "rows": 300}
    x_train, y_train = datasets.load_arrays(tmp_path / "train")
    assert datasets.read_meta(tmp_path / "train")["format"] == "npy"
    df = prep.read_table(str(imdb_csv))
    train, test = prep.to_splits(df, text_column="review", label_column="sentiment",
                                 positive_label="positive", negative_label="negative",
                                 split_column="split", test_fraction=0.5, seed=42)
    train = prep.subsample(train, 300, 42)
    test = prep.subsample(test, 300, 43)
    ref_vocab, ((ref_x, _), (ref_xt, _)) = reference(train.texts, test.texts, 2000, 40)
    assert prep.read_vocabulary(tmp_path / "vocab.txt") == ref_vocab
    np.testing.assert_array_equal(x_train, ref_x)
    np.testing.assert_array_equal(y_train, train.labels)
    np.testing.assert_array_equal(datasets.load_arrays(tmp_path / "test")[0], ref_xt)
