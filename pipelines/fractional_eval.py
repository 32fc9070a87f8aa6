"""Pipeline ``fractional-eval``: K shards of a test set, each evaluated on a GPU fraction.

importer(model), importer(test_data) -> plan_shards (K) -> dsl.ParallelFor over the shard
indices: evaluate_shard on a fractional GPU (default ``fraction:1/K``, i.e. K tasks fill one
GPU) -> combine_shards over ``dsl.Collected`` predictions: the metrics of the whole set,
equal to one evaluate_classifier pass over it. Each shard task caps TensorFlow's GPU memory
to its share (kfp_gpu.gpu.memory_cap.apply_gpu_share), so co-located shards do not overflow the GPU.

The GPU request is chosen at compile time (``build(gpu=...)``, ``kfp-gpu compile --gpu``):
``fraction:F`` / ``gpu-memory:MiB`` (KAI Scheduler / Run:ai), ``metagpu:U``, ``mig:PROFILE``,
``shared:1,replicas=R`` (time-slicing / MPS), ``hami:1,mem=MiB`` or ``gpu:1``. The number
of shards stays a pipeline parameter (``num_shards``); the factory's ``shards`` only sets
its default and the default fraction 1/K.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Metrics, Model

from kfp_gpu.compiler import task_settings
from kfp_gpu.components.combine_shards.component import combine_shards
from kfp_gpu.components.evaluate_shard.component import evaluate_shard
from kfp_gpu.components.plan_shards.component import plan_shards
from kfp_gpu.gpu import parse
from kfp_gpu.parameters.declared import check_signature, declare, documented, integer, number, text

NAME = "fractional-eval"
DEFAULT_SHARDS = 4
DEFAULT_GPU = f"fraction:{1 / DEFAULT_SHARDS:g}"


def _check_model(model_uri: str) -> None:
    """A local ``model_uri`` holds a ``.keras`` model (kfp_gpu.inputs.checks.check_model)."""
    from kfp_gpu.inputs import checks

    checks.check_model(model_uri)


#: Checks of local input files `kfp-gpu run --local` makes before any task starts
#: (kfp_gpu.parameters.declared.check_local_files).
LOCAL_CHECKS = {"model_uri": _check_model}

#: Each container task's default CPU/memory (display name -> Resources); `kfp-gpu compile
#: --resources TASK=cpu:Q,memory:Q` overrides them (kfp_gpu.compiler.task_settings).
TASK_RESOURCES = {
    "plan-shards": task_settings.Resources(cpu_limit="1", memory_limit="1G"),
    "evaluate-shard": task_settings.Resources(cpu_limit="2", memory_limit="4G"),
    "combine-shards": task_settings.Resources(cpu_limit="1", memory_limit="2G"),
}

#: Every pipeline parameter: type, accepted values, meaning (kfp_gpu.parameters.declared);
#: the ranges are components/shared/shards.py's and evaluate.py's checks made early.
PARAMETERS = declare(
    text("model_uri", "the Keras model to evaluate (folder or gs:// / s3:// / minio:// URI)",
         required=True,
         path_keywords=()),
    text("test_data_uri", "the test Dataset (a kfp-gpu Dataset folder or gs:// / s3:// / "
         "minio:// URI)",
         required=True, path_keywords=()),
    integer("num_shards", "shards (parallel tasks) the test set is cut into", 1),
    integer("batch_size", "prediction batch per step", 1),
    number("accuracy_threshold", "accuracy the whole set must reach to pass", 0, 1),
)


def default_gpu(shards: int) -> str:
    """``fraction:1/K`` as text, e.g. 4 -> ``fraction:0.25``, 3 -> ``fraction:0.333333``;
    one shard is a whole GPU, ``gpu:1`` (KAI refuses gpu-fraction >= 1)."""
    if shards < 1:
        raise ValueError(f"shards must be an integer >= 1, got {shards}")
    return "gpu:1" if shards == 1 else f"fraction:{1 / shards:g}"


class EvalOutputs(NamedTuple):
    """The pipeline's outputs: the combined Metrics and the accuracy gate."""

    metrics: Metrics
    passed: bool


def build(gpu: str | None = None, shards: int = DEFAULT_SHARDS,
          settings: task_settings.TaskSettings | None = None):
    """The ``fractional-eval`` pipeline function.

    Args:
        gpu: GPU request of every shard task (kfp_gpu.gpu text); default ``fraction:1/K``.
        shards: default of the ``num_shards`` parameter (K) and of the fraction.
        settings: credentials, volumes and CPU/memory overrides for every container task
            (:mod:`kfp_gpu.compiler.task_settings`; the importers run in KFP's driver).

    Raises:
        ValueError: invalid GPU request or shards < 1 (before compilation).
    """
    request = parse(gpu if gpu is not None else default_gpu(shards))

    @dsl.pipeline(name=NAME, description="Evaluate a Keras classifier on K shards of a test "
                  "set in parallel, each on a fraction of a GPU, and combine the metrics.")
    @documented(PARAMETERS)  # meanings and ranges into the compiled YAML
    def fractional_eval(
        model_uri: str,
        test_data_uri: str,
        num_shards: int = shards,
        batch_size: int = 256,
        accuracy_threshold: float = 0.8,
    ) -> EvalOutputs:
        # No display name on an importer: KFP 2.17's importer records its execution under
        # the display name, consumers look the task key up (kfp_gpu.compiler.ir_checks).
        model = dsl.importer(artifact_uri=model_uri, artifact_class=Model, reimport=False)
        data = dsl.importer(artifact_uri=test_data_uri, artifact_class=Dataset, reimport=False)
        plan = plan_shards(test_data=data.output, num_shards=num_shards)
        task_settings.apply(plan, "plan-shards", settings, TASK_RESOURCES["plan-shards"])
        with dsl.ParallelFor(plan.output) as index:
            shard = evaluate_shard(model=model.output, test_data=data.output, shard_index=index,
                                   num_shards=num_shards, batch_size=batch_size)
            task_settings.apply(shard, "evaluate-shard", settings,
                                TASK_RESOURCES["evaluate-shard"])
            request.apply_to_task(shard)
        combined = combine_shards(shard_predictions=dsl.Collected(shard.outputs["predictions"]),
                                  test_data=data.output, accuracy_threshold=accuracy_threshold)
        task_settings.apply(combined, "combine-shards", settings,
                            TASK_RESOURCES["combine-shards"])
        return EvalOutputs(metrics=combined.outputs["metrics"], passed=combined.outputs["Output"])

    check_signature(PARAMETERS, fractional_eval)
    return fractional_eval
