"""KFP component ``plan_shards``: the shard indices a ParallelFor fans out over."""

from kfp import dsl
from kfp.dsl import Dataset, Input

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def plan_shards(test_data: Input[Dataset], num_shards: int = 4) -> list[int]:
    """Shard indices ``[0, .., K-1]`` for ``K = num_shards`` contiguous shards of a Dataset.

    Args:
        test_data: Dataset (kfp_gpu.training.datasets directory; only its ``dataset.json`` is read).
        num_shards: K, an integer in 1..rows.

    Returns:
        ``list(range(K))`` (a JSON list of ints, the ``dsl.ParallelFor`` items).

    Raises:
        ValueError: K outside 1..rows, or an empty Dataset (before any GPU is requested).
    """
    from kfp_gpu.components.shared import shards
    from kfp_gpu.training import datasets

    return shards.plan(int(datasets.read_meta(test_data.path)["rows"]), num_shards)
