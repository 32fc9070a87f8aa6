"""KFP component ``evaluate_classifier``: metrics, confusion matrix, ROC, report, gate."""

from kfp import dsl
from kfp.dsl import ClassificationMetrics, Dataset, Input, Markdown, Metrics, Model, Output

from kfp_gpu.build import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def evaluate_classifier(
    model: Input[Model],
    test_data: Input[Dataset],
    metrics: Output[Metrics],
    classification_metrics: Output[ClassificationMetrics],
    report: Output[Markdown],
    accuracy_threshold: float = 0.8,
    batch_size: int = 256,
) -> bool:
    """Evaluate a Keras classifier on a test Dataset; returns accuracy >= threshold.

    Handles binary models (one sigmoid unit) and multi-class models (softmax).

    Args:
        model: Model directory with ``model.keras``.
        test_data: Dataset of (features, int32 label).
        accuracy_threshold: the gate; the boolean output is usable with ``dsl.If``.
        batch_size: prediction batch size.

    Outputs:
        metrics: accuracy, precision, recall, f1 (binary: positive class; multi-class:
            macro), roc_auc, loss, rows.
        classification_metrics: confusion matrix and (binary) ROC curve, rendered by
            the KFP UI.
        report: Markdown summary.
        Output (bool): ``accuracy >= accuracy_threshold``.
    """
    from kfp_gpu.components.shared import evaluate as ev
    from kfp_gpu.gpu import memory_cap

    memory_cap.apply_gpu_share()
    y_true, y_score = ev.predict(model.path, test_data.path, batch_size)
    n_classes = 2 if y_score.ndim == 1 else y_score.shape[1]
    m = ev.compute_metrics(y_true, y_score, ev.class_names_for(test_data.path, n_classes))
    return ev.log_outputs(m, metrics, classification_metrics, report.path, accuracy_threshold)
