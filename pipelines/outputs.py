"""The evaluation tail and output type shared by the training pipelines."""

from typing import NamedTuple

from kfp.dsl import HTML, Metrics, Model

from kfp_gpu.components.evaluate_classifier.component import evaluate_classifier
from kfp_gpu.dsl import task_settings

#: The ``evaluate`` task's default CPU/memory (`kfp-gpu compile --resources evaluate=...`).
EVALUATE_RESOURCES = task_settings.Resources(cpu_limit="2", memory_limit="4G")


class TrainingOutputs(NamedTuple):
    """A training pipeline's outputs: the trained Model, training and evaluation Metrics,
    the evaluation gate (accuracy >= threshold) and the evaluation's HTML report."""

    model: Model
    train_metrics: Metrics
    eval_metrics: Metrics
    passed: bool
    report: HTML


def evaluate_and_collect(train, test_data, accuracy_threshold, *, training_report=None,
                         training_logs=None, vocabulary=None,
                         batch_size: int | None = None,
                         settings: task_settings.TaskSettings | None = None) -> TrainingOutputs:
    """Add the CPU ``evaluate`` task on ``train``'s model and return the pipeline outputs.

    ``train`` is a training task with ``model`` and ``metrics`` outputs; ``test_data`` a
    Dataset channel; ``accuracy_threshold`` a float or pipeline parameter. The optional
    channels feed the evaluation's HTML report: the training step's report JSON and
    TensorBoard logs (throughput, parameters, training curves) and prep_text's vocabulary
    (misclassified reviews as words). ``batch_size``: the prediction batch size (None:
    the component's default, 256, safe for image models on a GPU share). ``settings``:
    the pipeline's task settings (:func:`kfp_gpu.dsl.task_settings.apply`).
    """
    extra = {k: v for k, v in (("training_report", training_report),
                               ("training_logs", training_logs),
                               ("vocabulary", vocabulary),
                               ("batch_size", batch_size)) if v is not None}
    ev = evaluate_classifier(model=train.outputs["model"], test_data=test_data,
                             accuracy_threshold=accuracy_threshold, **extra)
    task_settings.apply(ev, "evaluate", settings, EVALUATE_RESOURCES)
    return TrainingOutputs(model=train.outputs["model"], train_metrics=train.outputs["metrics"],
                           eval_metrics=ev.outputs["metrics"], passed=ev.outputs["Output"],
                           report=ev.outputs["html_report"])
