"""The text classifier's input pipeline: token-id Datasets (:mod:`kfp_gpu.training.datasets`)
to batches. TensorFlow is imported when the pipeline is built (tf.data, ``tf.data`` guide:
"Better performance with the tf.data API": cache before shuffle, prefetch last).
"""

from __future__ import annotations


def input_pipeline(ds, batch_size: int, *, shuffle: bool, seed: int, rows: int):
    """tf.data: cache -> (shuffle) -> batch -> prefetch.

    Args:
        ds: ``tf.data.Dataset`` of ``(int32 token ids [maxlen], int label)``.
        batch_size: rows per batch.
        shuffle: shuffle each epoch (buffer = ``rows``, the whole split).
        seed: shuffle seed.
        rows: rows in ``ds``.

    Returns:
        Batches ``(int32 [batch, maxlen], float32 [batch])``.
    """
    import tensorflow as tf

    ds = ds.map(lambda x, y: (x, tf.cast(y, tf.float32)), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(max(1, rows), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
