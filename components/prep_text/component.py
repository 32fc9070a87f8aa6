"""KFP component ``prep_text``: labelled text -> model-ready train/test Datasets."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Output

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def prep_text(
    train_data: Output[Dataset],
    test_data: Output[Dataset],
    vocabulary: Output[Artifact],
    stats: Output[Artifact],
    source: str = "keras:imdb",
    data_format: str = "auto",
    text_column: str = "review",
    label_column: str = "sentiment",
    positive_label: str = "positive",
    negative_label: str = "negative",
    split_column: str = "split",
    test_fraction: float = 0.5,
    max_rows_per_split: int = 0,
    num_words: int = 20000,
    maxlen: int = 80,
    seed: int = 42,
):
    """Tokenise labelled text into padded id sequences (vectorised, no TensorFlow).

    Runs on CPU (no GPU requested). The ids equal those of Keras TextVectorization
    (lower case, punctuation stripped, whitespace split) fitted on the training split and
    ``keras.utils.pad_sequences`` defaults, computed with numpy/Arrow kernels over all
    reviews at once (tokens.py).

    Args:
        source: ``keras:imdb`` (keras.datasets.imdb, downloaded on first use), or a local
            path (e.g. on a PVC) / ``gs://`` / ``s3://`` URI of a CSV (``.csv``/``.csv.gz``),
            JSON Lines or Parquet file.
        data_format: ``auto`` (from the suffix), ``csv``, ``jsonl`` or ``parquet``.
        text_column: column with the text (str).
        label_column: column with the label; values must be ``negative_label`` or
            ``positive_label`` (compared as strings), mapped to 0 / 1.
        split_column: column with ``train``/``test``; if absent or empty, a seeded
            ``test_fraction`` of the rows is held out.
        max_rows_per_split: keep a seeded random subset of at most this many rows per
            split (0: all).
        num_words: vocabulary size incl. padding (0) and OOV (1), fitted on train only.
        maxlen: sequence length; the LAST ``maxlen`` tokens are kept, zeros in front.
        seed: seed for the test split and subsampling.

    Outputs:
        train_data, test_data: Dataset directories (kfp_gpu.datasets: ``.npy`` arrays)
            of ``(int32 [maxlen] token ids, int32 label)``; metadata: rows, positive_share,
            truncated_share, vocabulary_size.
        vocabulary: text file, token id i on line i.
        stats: JSON with rows, class balance, vocabulary size and truncated share per split.

    Raises:
        FileNotFoundError: missing input file.
        ValueError: bad parameters; the kfp_gpu.inputs.errors family (missing column,
            empty file or text, label outside the declared classes, fewer than 2 classes,
            undecodable bytes, a damaged gzip file), recorded for the CLI by ``reported``.
    """
    import json
    import logging

    from kfp_gpu.components.prep_text import prep
    from kfp_gpu.inputs import storage
    from kfp_gpu.inputs.errors import reported

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with reported(input=source):  # one record line for `kfp-gpu run` if this fails
        result = prep.run(
            source=source, train_path=train_data.path, test_path=test_data.path,
            vocabulary_path=vocabulary.path, data_format=data_format, text_column=text_column,
            label_column=label_column, positive_label=positive_label,
            negative_label=negative_label, split_column=split_column,
            test_fraction=test_fraction, max_rows_per_split=max_rows_per_split,
            num_words=num_words, maxlen=maxlen, seed=seed)
    storage.write_text(stats.path, json.dumps(result, indent=2))
    for artifact, split in ((train_data, "train"), (test_data, "test")):
        artifact.metadata.update(result[split])
        artifact.metadata["vocabulary_size"] = result["vocabulary_size"]
        artifact.metadata["maxlen"] = maxlen
    vocabulary.metadata["vocabulary_size"] = result["vocabulary_size"]
