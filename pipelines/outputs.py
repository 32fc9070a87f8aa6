"""Output types shared by the training pipelines (KFP reads them from the return annotation)."""

from typing import NamedTuple

from kfp.dsl import Metrics, Model


class TrainingOutputs(NamedTuple):
    """A training pipeline's outputs: the trained Model, training and evaluation Metrics,
    and the evaluation gate (accuracy >= threshold)."""

    model: Model
    train_metrics: Metrics
    eval_metrics: Metrics
    passed: bool
