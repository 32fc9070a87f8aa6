"""KFP component ``evaluate_classifier``: metrics, confusion matrix, ROC, report, gate."""

from kfp import dsl
from kfp.dsl import (
    HTML,
    Artifact,
    ClassificationMetrics,
    Dataset,
    Input,
    Markdown,
    Metrics,
    Model,
    Output,
)

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def evaluate_classifier(
    model: Input[Model],
    test_data: Input[Dataset],
    metrics: Output[Metrics],
    classification_metrics: Output[ClassificationMetrics],
    report: Output[Markdown],
    html_report: Output[HTML],
    training_report: Input[Artifact] = None,
    training_logs: Input[Artifact] = None,
    vocabulary: Input[Artifact] = None,
    accuracy_threshold: float = 0.8,
    batch_size: int = 256,
) -> bool:
    """Evaluate a Keras classifier on a test Dataset; returns accuracy >= threshold.

    Handles binary models (one sigmoid unit) and multi-class models (softmax).

    Args:
        model: Model directory with ``model.keras``.
        test_data: Dataset of (features, int32 label).
        training_report: optional; the training step's report JSON (train_text_classifier
            ``report``): throughput, device and parameters for the HTML report.
        training_logs: optional; the training step's TensorBoard log directory
            (``tensorboard``): per-epoch loss and accuracy for the training curves.
        vocabulary: optional; prep_text's vocabulary, to show misclassified reviews as
            the words the model saw.
        accuracy_threshold: the gate; the boolean output is usable with ``dsl.If``.
        batch_size: prediction batch size.

    Outputs:
        metrics: accuracy, precision, recall, f1 (binary: positive class; multi-class:
            macro), roc_auc, loss, rows.
        classification_metrics: confusion matrix and (binary) ROC curve, rendered by
            the KFP UI.
        report: Markdown summary.
        html_report: one self-contained HTML page (KFP UI visualization tab): metrics,
            confusion matrix, ROC and precision/recall curves, training curves,
            parameters and throughput, the most confidently misclassified examples.
        Output (bool): ``accuracy >= accuracy_threshold``.
    """
    import time

    from kfp_gpu.components.evaluate_classifier import html_report as hr
    from kfp_gpu.components.shared import evaluate as ev
    from kfp_gpu.gpu import memory_cap
    from kfp_gpu.inputs.errors import reported

    memory_cap.apply_gpu_share()
    t0 = time.perf_counter()
    with reported(input=model.path):  # one record line for `kfp-gpu run` if this fails
        y_true, y_score = ev.predict(model.path, test_data.path, batch_size)
    seconds = time.perf_counter() - t0
    n_classes = 2 if y_score.ndim == 1 else y_score.shape[1]
    m = ev.compute_metrics(y_true, y_score, ev.class_names_for(test_data.path, n_classes))
    passed = ev.log_outputs(m, metrics, classification_metrics, report.path, accuracy_threshold)
    hr.write(html_report.path, m, y_true, y_score, threshold=accuracy_threshold,
             dataset_path=test_data.path, predict_seconds=seconds,
             training_report_path=training_report.path if training_report else None,
             training_logs_path=training_logs.path if training_logs else None,
             vocabulary_path=vocabulary.path if vocabulary else None)
    from kfp_gpu import task_outputs  # one record line for `kfp-gpu submit --wait`

    task_outputs.emit({"metrics": metrics, "classification_metrics": classification_metrics,
                       "report": report, "html_report": html_report}, {"passed": passed})
    return passed
