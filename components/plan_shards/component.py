"""KFP component ``plan_shards``: the shard indices a ParallelFor fans out over."""

from kfp import dsl
from kfp.dsl import Dataset, Input

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def plan_shards(test_data: Input[Dataset], num_shards: int = 4,
                gpu_fraction: float = 0.0) -> list[int]:
    """Shard indices ``[0, .., K-1]`` for ``K = num_shards`` contiguous shards of a Dataset.

    Args:
        test_data: Dataset (kfp_gpu.training.datasets directory; only its ``dataset.json`` is read).
        num_shards: K, an integer in 1..rows.
        gpu_fraction: the GPU fraction each shard task was compiled with (its
            ``gpu-fraction`` annotation; 0 = the shards' request is not a fraction): the
            K shards must fit on one GPU, K x gpu_fraction <= 1.

    Returns:
        ``list(range(K))`` (a JSON list of ints, the ``dsl.ParallelFor`` items).

    Raises:
        ValueError: K outside 1..rows, or an empty Dataset; InputError: K shards of
            ``gpu_fraction`` need more than one GPU -- before any GPU is requested, with
            the record ``kfp-gpu submit`` reads.
    """
    from kfp_gpu.components.shared import shards
    from kfp_gpu.inputs.errors import reported
    from kfp_gpu.training import datasets

    with reported():  # one record line for `kfp-gpu run` / `submit` if this fails
        return shards.plan(int(datasets.read_meta(test_data.path)["rows"]), num_shards,
                           gpu_fraction)
