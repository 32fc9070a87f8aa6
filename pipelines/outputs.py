"""The evaluation tail and output type shared by the training pipelines."""

from typing import NamedTuple

from kfp.dsl import Metrics, Model

from kfp_gpu.components.evaluate_classifier.component import evaluate_classifier


class TrainingOutputs(NamedTuple):
    """A training pipeline's outputs: the trained Model, training and evaluation Metrics,
    and the evaluation gate (accuracy >= threshold)."""

    model: Model
    train_metrics: Metrics
    eval_metrics: Metrics
    passed: bool


def evaluate_and_collect(train, test_data, accuracy_threshold) -> TrainingOutputs:
    """Add the CPU ``evaluate`` task on ``train``'s model and return the pipeline outputs.

    ``train`` is a training task with ``model`` and ``metrics`` outputs; ``test_data`` a
    Dataset channel; ``accuracy_threshold`` a float or pipeline parameter.
    """
    ev = evaluate_classifier(model=train.outputs["model"], test_data=test_data,
                             accuracy_threshold=accuracy_threshold)
    ev.set_display_name("evaluate").set_cpu_limit("2").set_memory_limit("4G")
    return TrainingOutputs(model=train.outputs["model"], train_metrics=train.outputs["metrics"],
                           eval_metrics=ev.outputs["metrics"], passed=ev.outputs["Output"])
