"""KFP component ``combine_shards``: metrics of the whole set from its shards' predictions."""

from kfp import dsl
from kfp.dsl import ClassificationMetrics, Dataset, Input, Markdown, Metrics, Output

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def combine_shards(
    shard_predictions: Input[list[Dataset]],
    test_data: Input[Dataset],
    metrics: Output[Metrics],
    classification_metrics: Output[ClassificationMetrics],
    report: Output[Markdown],
    accuracy_threshold: float = 0.8,
) -> bool:
    """Concatenate the shards' predictions in row order and compute the metrics once.

    The outputs match ``evaluate_classifier`` on the whole set (same keys, same
    computation: evaluate.compute_metrics on the same labels and per-row scores).

    Args:
        shard_predictions: ``dsl.Collected`` predictions of every ``evaluate_shard`` task.
        test_data: the Dataset that was sharded (class names, row count check).
        accuracy_threshold: the gate.

    Outputs:
        metrics, classification_metrics, report: as evaluate_classifier.
        Output (bool): ``accuracy >= accuracy_threshold``.

    Raises:
        ValueError: shards missing, overlapping or from another set.
    """
    from kfp_gpu.components.shared import evaluate as ev
    from kfp_gpu.components.shared import shards
    from kfp_gpu.training import datasets

    parts = [shards.load_predictions(p.path) for p in shard_predictions]
    y_true, y_score = shards.combine(parts)
    rows = int(datasets.read_meta(test_data.path)["rows"])
    if len(y_true) != rows:
        raise ValueError(f"shards hold {len(y_true)} rows but the test set has {rows}")
    n_classes = 2 if y_score.ndim == 1 else y_score.shape[1]
    m = ev.compute_metrics(y_true, y_score, ev.class_names_for(test_data.path, n_classes))
    metrics.log_metric("shards", float(len(parts)))
    passed = ev.log_outputs(m, metrics, classification_metrics, report.path, accuracy_threshold)
    from kfp_gpu import task_outputs  # one record line for `kfp-gpu submit --wait`

    task_outputs.emit({"metrics": metrics, "classification_metrics": classification_metrics,
                       "report": report}, {"passed": passed})
    return passed
