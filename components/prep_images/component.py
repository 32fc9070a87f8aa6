"""KFP component ``prep_images``: Fashion-MNIST / npz / synthetic images -> train/test Datasets."""

from kfp import dsl
from kfp.dsl import Dataset, Output

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def prep_images(
    train_data: Output[Dataset],
    test_data: Output[Dataset],
    source: str = "fashion-mnist",
    max_rows_per_split: int = 0,
    synthetic_rows: int = 6000,
    image_size: int = 28,
    seed: int = 0,
):
    """Read images and labels and write them as train/test Dataset artifacts (CPU).

    Args:
        source: ``fashion-mnist`` (the four IDX ``.gz`` files under
            ``$KFP_GPU_DATA_DIR/fashion-mnist``), an IDX directory path, an ``.npz`` file
            (local or ``gs://``; keys x_train, y_train, x_test, y_test) or ``synthetic``.
        max_rows_per_split: seeded subset per split (0: all).
        synthetic_rows, image_size: size of the ``synthetic`` source.
        seed: subsampling / synthetic seed.

    Outputs:
        train_data, test_data: ``(uint8 [H, W, C], int32 label)`` Datasets; sidecar and
            metadata: rows, num_classes, classes (names), class_counts.

    Raises:
        ValueError / FileNotFoundError: bad source, before anything is written; recorded
            for the CLI by ``reported`` (a missing file or object: an input error; a store
            that does not answer: the environment's).
    """
    from kfp_gpu.components.prep_images import prep
    from kfp_gpu.inputs.errors import reported

    with reported(input=source):  # one record line for `kfp-gpu run` if this fails
        meta = prep.run(source, train_data.path, test_data.path, max_rows_per_split,
                        synthetic_rows, image_size, seed)
    for art, split in ((train_data, "train"), (test_data, "test")):
        m = meta[split]
        art.metadata.update({"rows": m["rows"], "num_classes": m["num_classes"],
                             "classes": m["classes"], "feature_shape": m["feature_shape"]})
