"""KFP component ``evaluate_shard``: predictions of one contiguous shard of a test set."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def evaluate_shard(
    model: Input[Model],
    test_data: Input[Dataset],
    predictions: Output[Dataset],
    shard_metrics: Output[Metrics],
    shard_index: int,
    num_shards: int = 4,
    batch_size: int = 256,
):
    """Predict rows ``[i*N//K, (i+1)*N//K)`` of ``test_data`` with ``model``.

    Caps TensorFlow's GPU memory to the task's GPU share first (kfp_gpu.gpu.memory_cap), so K
    shards can share one GPU (e.g. each on ``fraction:1/K``) without overflowing it.

    Args:
        model: Model directory with ``model.keras``.
        test_data: Dataset of (features, int32 label).
        shard_index: i, 0-based; num_shards: K (1..rows); batch_size: prediction batch.

    Outputs:
        predictions: directory with ``predictions.npz`` (y_true int32 [n], y_score float32
            [n] or [n, C], start, stop, rows) and ``shard.json``.
        shard_metrics: rows, seconds, samples_per_sec, gpu_memory_limit_mib (0 = no cap).
    """
    from kfp_gpu.components.shared import shards
    from kfp_gpu.gpu import memory_cap
    from kfp_gpu.inputs.errors import reported

    cap = memory_cap.apply_gpu_share()
    with reported(input=model.path):  # one record line for `kfp-gpu run` if this fails
        facts = shards.evaluate_shard(model.path, test_data.path, predictions.path,
                                      shard_index, num_shards, batch_size)
    predictions.metadata.update({k: facts[k] for k in ("index", "start", "stop", "rows")})
    shard_metrics.log_metric("rows", float(facts["stop"] - facts["start"]))
    shard_metrics.log_metric("seconds", float(facts["seconds"]))
    shard_metrics.log_metric("samples_per_sec", float(facts["samples_per_sec"]))
    shard_metrics.log_metric("gpu_memory_limit_mib", float(cap.get("limit_mib") or 0))
