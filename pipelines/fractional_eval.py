"""Pipeline ``fractional-eval``: K shards of a test set, each evaluated on a GPU fraction.

importer(model), importer(test_data) -> plan_shards (K) -> dsl.ParallelFor over the shard
indices: evaluate_shard on a fractional GPU (default ``fraction:1/K``, i.e. K tasks fill one
GPU) -> combine_shards over ``dsl.Collected`` predictions: the metrics of the whole set,
equal to one evaluate_classifier pass over it. Each shard task caps TensorFlow's GPU memory
to its share (kfp_gpu.gpu.memory_cap.apply_gpu_share), so co-located shards do not overflow the GPU.

The GPU request is chosen at compile time (``build(gpu=...)``, ``kfp-gpu compile --gpu``):
``fraction:F`` / ``gpu-memory:MiB`` (KAI Scheduler / Run:ai), ``metagpu:U``, ``mig:PROFILE``,
``shared:1,replicas=R`` (time-slicing / MPS), ``hami:1,mem=MiB`` or ``gpu:1``. The number
of shards stays a pipeline parameter (``num_shards``); the factory's ``shards`` sets its
default and the default fraction 1/K, and a ``fraction:F`` given alone sets the default K
to the shards that fit one GPU, floor(1/F).

A fraction is a pod annotation, fixed when compiling, while ``num_shards`` is chosen per
run; the K shards of a run must fit on one GPU (K x F <= 1, fewer leave part of it free):
``kfp-gpu run --local`` and ``kfp-gpu submit`` refuse a larger ``num_shards`` before any
task starts (:func:`check_spec`, against the compiled spec), and ``plan_shards`` refuses it
before any GPU is requested in a run started elsewhere (the KFP UI), from the same
compiled fraction (its ``gpu_fraction`` input).
"""

from collections.abc import Mapping
from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Metrics, Model

from kfp_gpu.components.combine_shards.component import combine_shards
from kfp_gpu.components.evaluate_shard.component import evaluate_shard
from kfp_gpu.components.plan_shards.component import plan_shards
from kfp_gpu.components.shared import shards as shard_rules
from kfp_gpu.dsl import task_settings
from kfp_gpu.dsl.entry import PipelineEntry
from kfp_gpu.dsl.parameters import check_signature, declare, documented, integer, number, text
from kfp_gpu.gpu import parse

_NAME = "fractional-eval"
DEFAULT_SHARDS = 4
_DEFAULT_GPU = f"fraction:{1 / DEFAULT_SHARDS:g}"


def _check_model(model_uri: str) -> None:
    """A local ``model_uri`` holds a ``.keras`` model (kfp_gpu.inputs.checks.check_model)."""
    from kfp_gpu.inputs import checks

    checks.check_model(model_uri)


#: Checks of local input files `kfp-gpu run --local` makes before any task starts
#: (kfp_gpu.catalog.params.check_local_files).
_LOCAL_CHECKS = {"model_uri": _check_model}

#: Each container task's default CPU/memory (display name -> Resources); `kfp-gpu compile
#: --resources TASK=cpu:Q,memory:Q` overrides them (kfp_gpu.dsl.task_settings).
_TASK_RESOURCES = {
    "plan-shards": task_settings.Resources(cpu_limit="1", memory_limit="1G"),
    "evaluate-shard": task_settings.Resources(cpu_limit="2", memory_limit="4G"),
    "combine-shards": task_settings.Resources(cpu_limit="1", memory_limit="2G"),
}

#: Every pipeline parameter: type, accepted values, meaning (kfp_gpu.dsl.parameters);
#: the ranges are components/shared/shards.py's and evaluate.py's checks made early.
_PARAMETERS = declare(
    text("model_uri", "the Keras model to evaluate (folder or gs:// / s3:// / minio:// URI)",
         required=True, path_keywords=(), schemes=("gs", "s3", "minio")),
    text("test_data_uri", "the test Dataset (a kfp-gpu Dataset folder or gs:// / s3:// / "
         "minio:// URI)",
         required=True, path_keywords=(), schemes=("gs", "s3", "minio")),
    integer("num_shards", "shards (parallel tasks) the test set is cut into, all on one GPU: "
            "with a fraction:F request (the default, 0.25) at most 1/F", 1),
    integer("batch_size", "prediction batch per step", 1),
    number("accuracy_threshold", "accuracy the whole set must reach to pass", 0, 1),
)


def default_gpu(shards: int) -> str:
    """``fraction:1/K`` as text, e.g. 4 -> ``fraction:0.25``, 3 -> ``fraction:0.333333``;
    one shard is a whole GPU, ``gpu:1`` (KAI refuses gpu-fraction >= 1)
    (:func:`kfp_gpu.components.shared.shards.gpu_for`).

    Raises:
        ValueError: ``shards`` < 1.
    """
    return shard_rules.gpu_for(shards)


#: The plan-shards input that carries the shards' compiled GPU fraction (0: none).
FRACTION_INPUT = "gpu_fraction"


def compiled_fraction(spec: Mapping) -> float:
    """The GPU fraction each shard task of a compiled fractional-eval asks for (0.0 when
    its request is not a fraction): the constant ``build`` gives plan-shards'
    ``gpu_fraction`` (``root.dag.tasks.plan-shards.inputs.parameters.gpu_fraction.
    runtimeValue.constant`` of the IR, written from the same request as the shard task's
    ``gpu-fraction`` annotation). A spec without it (compiled before the input existed)
    reads as 0.0."""
    task = spec.get("root", {}).get("dag", {}).get("tasks", {}).get("plan-shards", {})
    value = (task.get("inputs", {}).get("parameters", {}).get(FRACTION_INPUT, {})
             .get("runtimeValue", {}).get("constant", 0.0))
    return float(value or 0.0)


def check_spec(spec: Mapping, values: Mapping[str, object]) -> None:
    """The run's ``num_shards`` (given, else the compiled default) fits on one GPU at the
    compiled per-shard fraction (:func:`compiled_fraction`,
    :func:`kfp_gpu.components.shared.shards.check_fits`); what ``kfp-gpu run --local`` and
    ``kfp-gpu submit`` ask before any task starts.

    Raises:
        kfp_gpu.inputs.errors.InputError: too many shards for one GPU (one line: the
            accepted counts and the compile option for the count asked).
    """
    default = (spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
               .get("num_shards", {}).get("defaultValue", DEFAULT_SHARDS))
    shard_rules.check_fits(int(values.get("num_shards", default)), compiled_fraction(spec))


#: Checks of a run's arguments against the compiled pipeline spec that `kfp-gpu run
#: --local` and `kfp-gpu submit` make before any task starts
#: (kfp_gpu.catalog.params.check_against_spec).


class EvalOutputs(NamedTuple):
    """The pipeline's outputs: the combined Metrics and the accuracy gate."""

    metrics: Metrics
    passed: bool


def build(gpu: str | None = None, shards: int | None = None,
          settings: task_settings.TaskSettings | None = None):
    """The ``fractional-eval`` pipeline function.

    Args:
        gpu: GPU request of every shard task (kfp_gpu.gpu text); default ``fraction:1/K``.
        shards: default of the ``num_shards`` parameter (K) and of the fraction; default
            :data:`DEFAULT_SHARDS`, or with a ``fraction:F`` ``gpu`` the shards that fit
            one GPU (floor(1/F)).
        settings: credentials, volumes and CPU/memory overrides for every container task
            (:mod:`kfp_gpu.dsl.task_settings`; the importers run in KFP's driver).

    Raises:
        ValueError: invalid GPU request, shards < 1, or ``shards`` shards that do not fit
            one GPU at a ``fraction:F`` ``gpu`` (before compilation).
    """
    if shards is None:
        given = parse(gpu) if gpu is not None else None
        shards = (shard_rules.shards_per_gpu(given.fraction)
                  if given is not None and given.kind == "fraction" else DEFAULT_SHARDS)
    request = parse(gpu if gpu is not None else default_gpu(shards))
    fraction = request.fraction if request.kind == "fraction" else 0.0
    shard_rules.check_fits(shards, fraction)

    @dsl.pipeline(name=_NAME, description="Evaluate a Keras classifier on K shards of a test "
                  "set in parallel, each on a fraction of a GPU, and combine the metrics.")
    @documented(_PARAMETERS)  # meanings and ranges into the compiled YAML
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
        plan = plan_shards(test_data=data.output, num_shards=num_shards,
                           gpu_fraction=fraction)
        task_settings.apply(plan, "plan-shards", settings, _TASK_RESOURCES["plan-shards"])
        with dsl.ParallelFor(plan.output) as index:
            shard = evaluate_shard(model=model.output, test_data=data.output, shard_index=index,
                                   num_shards=num_shards, batch_size=batch_size)
            task_settings.apply(shard, "evaluate-shard", settings,
                                _TASK_RESOURCES["evaluate-shard"])
            request.apply_to_task(shard)
        combined = combine_shards(shard_predictions=dsl.Collected(shard.outputs["predictions"]),
                                  test_data=data.output, accuracy_threshold=accuracy_threshold)
        task_settings.apply(combined, "combine-shards", settings,
                            _TASK_RESOURCES["combine-shards"])
        return EvalOutputs(metrics=combined.outputs["metrics"], passed=combined.outputs["Output"])

    check_signature(_PARAMETERS, fractional_eval)
    return fractional_eval


#: What the catalog reads (kfp_gpu.catalog.discover): this module's one export.
ENTRY = PipelineEntry(
    name=_NAME,
    build=build,
    parameters=_PARAMETERS,
    default_gpu=_DEFAULT_GPU,
    local_checks=_LOCAL_CHECKS,
    task_resources=_TASK_RESOURCES,
    spec_check=check_spec,
)
