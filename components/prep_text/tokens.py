"""Vectorised text -> padded token ids with numpy and Apache Arrow (no TensorFlow).

Gives, id for id, the output of the Keras ``TextVectorization`` pass prep_text used
before (``standardize="lower_and_strip_punctuation"``, ``split="whitespace"``,
``output_mode="int"``, ``max_tokens=num_words``, adapted on the training texts) followed
by ``keras.utils.pad_sequences(padding="pre", truncating="pre")``, but over all reviews
at once: the standardisation and the split are ASCII byte operations on the one UTF-8
buffer of an Arrow string array (UTF-8 multi-byte sequences never contain ASCII bytes),
and every token is hashed once (``pyarrow.compute.dictionary_encode``). The semantics,
each checked against TensorFlow in components/prep_text/tests/test_tokens.py:

- lower case: ASCII only, as ``tf.strings.lower`` with its default ``encoding=""``
  ("É" stays "É");
- punctuation: the 32 ASCII punctuation bytes of the class Keras passes to
  ``tf.strings.regex_replace`` (keras ``keras/src/layers/preprocessing/
  text_vectorization.py``, ``DEFAULT_STRIP_REGEX``) are deleted;
- split: runs of ASCII whitespace `` \\t\\n\\v\\f\\r`` (``tf.strings.split`` with
  ``sep=None``); no empty tokens;
- vocabulary: ``""`` (padding, id 0), ``"[UNK]"`` (OOV, id 1), then the training tokens
  by count descending, ties by the token's UTF-8 bytes descending (keras
  ``keras/src/layers/preprocessing/index_lookup.py``, ``finalize_state``:
  ``np.lexsort((tokens, counts))[::-1]``), at most ``num_words - 2`` of them;
- first, HTML line breaks become one space: Python ``re`` ``<br\\s*/?>`` with
  IGNORECASE (``\\s`` = every ``str.isspace`` character, written out for RE2 below).
One difference: the old path went through ``numpy.astype(str)``, which drops trailing
NUL characters of a text; here they are kept (as part of the last token).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PAD, OOV = "", "[UNK]"
#: Every character for which ``str.isspace()`` is true (what Python's ``re`` ``\s`` matches
#: in str patterns), as an RE2 class body; components/prep_text/tests/test_tokens.py checks it.
PY_WHITESPACE = (r"\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
                 r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}")
HTML_BREAK = rf"(?i)<br[{PY_WHITESPACE}]*/?>"
#: The 32 ASCII punctuation bytes of Keras' DEFAULT_STRIP_REGEX (deleted).
PUNCTUATION = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
#: bytes.translate tables: A-Z -> a-z; 1 for punctuation; 1 for ASCII whitespace.
_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_IS_PUNCTUATION = bytes(int(c in PUNCTUATION) for c in range(256))
SPACES = b" \t\n\v\f\r"
_IS_SPACE = bytes(int(c in SPACES) for c in range(256))


def as_arrow(texts) -> pa.Array:
    """``texts`` (sequence or numpy object array of str, [N]) as one Arrow large_string array."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if isinstance(texts, pa.Array):
        return texts.cast(pa.large_string())
    return pa.array(np.asarray(texts, dtype=object), type=pa.large_string())


def clean(texts) -> pa.Array:
    """HTML line breaks (``<br />``, ``<BR>``, ...) replaced by one space each, [N] strings."""
    return pc.replace_substring_regex(as_arrow(texts), HTML_BREAK, " ")


def _utf8(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes uint8 [B], offsets int64 [N+1] from 0) of a large_string array, zero-copy."""
    off = np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)
    data = np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] else np.zeros(0, np.uint8)
    return data[off[0]:off[-1]], off - off[0]


def tokenize(texts) -> tuple[pa.Array, np.ndarray]:
    """Standardise (ASCII lower case, punctuation deleted) and split on ASCII whitespace.

    Args:
        texts: [N] str (already cleaned, see :func:`clean`).

    Returns:
        ``(tokens, offsets)``: all tokens as one Arrow large_string array ``[T]``; the
        tokens of text i are ``tokens[offsets[i]:offsets[i+1]]`` (int64 ``[N+1]``).
    """
    data, off = _utf8(as_arrow(texts))
    raw = data.tobytes()
    punct = np.frombuffer(raw.translate(_IS_PUNCTUATION), dtype=np.bool_)
    per_text = np.bincount(np.searchsorted(off, np.flatnonzero(punct), "right") - 1,
                           minlength=len(off) - 1)
    off = off.copy()
    off[1:] -= np.cumsum(per_text)
    kept = raw.translate(_LOWER, PUNCTUATION)  # lower-cased, punctuation deleted
    space = np.frombuffer(kept.translate(_IS_SPACE), dtype=np.bool_)
    n = len(kept)
    edge = np.ones(n + 1, dtype=bool)  # a token may start or end before byte i
    edge[1:n] = space[1:] != space[:-1]
    edge[off] = True
    word = ~space
    starts = np.flatnonzero(word & edge[:n])
    ends = np.flatnonzero(word & edge[1:]) + 1
    tok_off = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=tok_off[1:])
    tokens = pa.LargeStringArray.from_buffers(
        len(starts), pa.py_buffer(tok_off), pa.py_buffer(kept.translate(None, SPACES)))
    return tokens, np.searchsorted(starts, off).astype(np.int64)


def vocabulary_order(words: pa.Array, counts: np.ndarray, num_words: int) -> np.ndarray:
    """Indices into ``words`` of the learned vocabulary: count > 0, by count descending
    then UTF-8 bytes descending, at most ``num_words - 2`` (Keras' IndexLookup order)."""
    table = pa.table({"token": words.cast(pa.large_binary()), "count": counts,
                      "i": np.arange(len(counts))})
    table = table.filter(pc.greater(table["count"], 0))
    order = pc.sort_indices(table, sort_keys=[("count", "descending"), ("token", "descending")])
    return table["i"].take(order[: max(0, num_words - 2)]).to_numpy()


def encode(texts, *, fit_rows: int, num_words: int, maxlen: int,
           keep: str = "last") -> tuple[list[str], np.ndarray, np.ndarray]:
    """Vocabulary fitted on the first ``fit_rows`` texts; padded ids and lengths of all.

    Args:
        texts: [N] str, e.g. the training texts followed by the test texts.
        fit_rows: how many leading texts the vocabulary is learned from.
        num_words: vocabulary size incl. padding (0) and OOV (1).
        maxlen: sequence length.
        keep: ``last``: the last ``maxlen`` tokens, zeros in front (``pad_sequences``
            defaults, what prep_text writes); ``first``: the first ``maxlen`` tokens,
            zeros after (TextVectorization's ``output_sequence_length``).

    Returns:
        ``(vocabulary, ids, lengths)``: vocabulary list of str (id i = entry i), ids
        int32 ``[N, maxlen]`` (tokens outside the vocabulary -> 1), lengths int64 ``[N]``
        (token counts before truncation).

    Raises:
        ValueError: ``num_words < 3``, ``maxlen < 1``, ``fit_rows`` outside ``[1, N]``,
            ``keep`` not ``last``/``first``.
    """
    if keep not in ("last", "first"):
        raise ValueError(f"keep must be 'last' or 'first', got {keep!r}")
    if num_words < 3:
        raise ValueError(f"num_words must be >= 3 (padding, OOV and one word), got {num_words}")
    if maxlen < 1:
        raise ValueError(f"maxlen must be >= 1, got {maxlen}")
    arr = clean(texts)
    if not 1 <= fit_rows <= len(arr):
        raise ValueError(f"fit_rows must be in [1, {len(arr)}], got {fit_rows}")
    tokens, offsets = tokenize(arr)
    dictionary = pc.dictionary_encode(tokens)
    codes = dictionary.indices.to_numpy()
    counts = np.bincount(codes[: offsets[fit_rows]], minlength=len(dictionary.dictionary))
    learned = vocabulary_order(dictionary.dictionary, counts, num_words)
    id_of_code = np.ones(len(counts), dtype=np.int32)
    id_of_code[learned] = np.arange(2, 2 + len(learned), dtype=np.int32)
    vocabulary = [PAD, OOV] + dictionary.dictionary.take(pa.array(learned)).to_pylist()
    ids = pad(id_of_code[codes], offsets, maxlen, keep)
    return vocabulary, ids, np.diff(offsets)


def pad(flat: np.ndarray, offsets: np.ndarray, maxlen: int, keep: str = "last") -> np.ndarray:
    """Rows ``flat[offsets[i]:offsets[i+1]]`` as int32 ``[N, maxlen]``.

    ``keep="last"``: the last ``maxlen`` values right-aligned, zeros in front
    (``pad_sequences`` ``padding="pre", truncating="pre"``); ``"first"``: the first
    ``maxlen`` values left-aligned, zeros after.
    """
    starts, ends = offsets[:-1], offsets[1:]
    out = np.zeros((len(ends), maxlen), dtype=np.int32)
    step = max(1, (1 << 22) // maxlen)  # rows per chunk: index matrices of ~32 MB
    last = keep == "last"
    cols = np.arange(maxlen, dtype=np.int64) - (maxlen if last else 0)
    for lo in range(0, len(ends), step):
        s, e = starts[lo:lo + step, None], ends[lo:lo + step, None]
        pos = (e if last else s) + cols
        valid = (pos >= s) & (pos < e)
        out[lo:lo + step][valid] = flat[pos[valid]]
    return out
