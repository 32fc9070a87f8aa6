"""fractional-eval: shard arithmetic, exact recombination, compiled fractional requests, and a
kfp.local run on real IMDB reviews whose combined metrics equal one evaluate_classifier pass."""

import itertools
import math

import numpy as np
import pytest
from kfp import compiler, dsl, local
from kfp.dsl import Dataset, Metrics, Model

from kfp_gpu.components.evaluate_classifier.component import evaluate_classifier
from kfp_gpu.components.shared import evaluate as ev
from kfp_gpu.components.shared import shards
from kfp_gpu.inputs import errors
from kfp_gpu.pipelines import fractional_eval as fe
from tests.support import ir


@pytest.mark.parametrize("rows, k", [(10, 1), (10, 3), (10, 10), (25000, 4), (25000, 7)])
def test_shards_tile_the_set_in_order(rows, k):
    bounds = [shards.shard_bounds(rows, k, i) for i in range(k)]
    assert bounds[0][0] == 0 and bounds[-1][1] == rows
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1
    assert shards.plan(rows, k) == list(range(k))


@pytest.mark.parametrize("rows, k, i, needle", [
    (10, 0, 0, "1..10"), (10, 11, 0, "1..10"), (10, 2, 2, "0..1"), (0, 1, 0, "empty")])
def test_bad_shard_requests(rows, k, i, needle):
    with pytest.raises(ValueError, match=needle):
        shards.shard_bounds(rows, k, i)


def _part(start, stop, rows, rng):
    return {"y_true": rng.integers(0, 2, stop - start).astype(np.int32),
            "y_score": rng.random(stop - start).astype(np.float32),
            "start": start, "stop": stop, "rows": rows}


def test_combine_restores_order_and_metrics_exactly():
    rng = np.random.default_rng(0)
    parts = [_part(*shards.shard_bounds(1001, 4, i), 1001, rng) for i in range(4)]
    y_true = np.concatenate([p["y_true"] for p in parts])
    y_score = np.concatenate([p["y_score"] for p in parts])
    got_t, got_s = shards.combine(list(reversed(parts)))  # Collected order is not guaranteed
    assert np.array_equal(got_t, y_true) and np.array_equal(got_s, y_score)
    assert ev.compute_metrics(got_t, got_s) == ev.compute_metrics(y_true, y_score)


def test_combine_refuses_gaps_overlaps_and_foreign_shards():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="gap at row 5"):
        shards.combine([_part(0, 5, 20, rng), _part(6, 20, 20, rng)])
    with pytest.raises(ValueError, match="overlap at row 5"):
        shards.combine([_part(0, 5, 20, rng), _part(4, 20, 20, rng)])
    with pytest.raises(ValueError, match="cover rows"):
        shards.combine([_part(0, 5, 20, rng), _part(5, 19, 20, rng)])
    with pytest.raises(ValueError, match="different sizes"):
        shards.combine([_part(0, 5, 20, rng), _part(5, 20, 21, rng)])
    with pytest.raises(ValueError, match="no shard"):
        shards.combine([])


@pytest.mark.parametrize("gpu, shards_k, annotations, resource, count", [
    (None, 4, {"gpu-fraction": "0.25", "gpu-fraction-container-name": "main"}, "", ""),
    (None, 8, {"gpu-fraction": "0.125", "gpu-fraction-container-name": "main"}, "", ""),
    ("gpu-memory:4096", 4, {"gpu-memory": "4096", "gpu-fraction-container-name": "main"},
     "", ""),
    ("metagpu:25", 4, {}, "cnvrg.io/metagpu", "25"),
    ("mig:1g.10gb,model=H100-80GB", 7, {}, "nvidia.com/mig-1g.10gb", "1"),
    ("shared:1,replicas=4", 4, {}, "nvidia.com/gpu", "1"),
])
def test_compiles_with_fractional_requests(gpu, shards_k, annotations, resource, count,
                                           tmp_path):
    out = tmp_path / "fe.yaml"
    compiler.Compiler().compile(fe.build(gpu, shards=shards_k), str(out))
    spec, platform = ir.load(out)
    assert spec.root.input_definitions.parameters["num_shards"].default_value.number_value \
        == shards_k
    loop = next(t for name, t in spec.root.dag.tasks.items() if name.startswith("for-loop"))
    assert loop.parameter_iterator.items.input_parameter.endswith("plan-shards-Output")
    body = spec.components[loop.component_ref.name].dag
    label = spec.components[body.tasks["evaluate-shard"].component_ref.name].executor_label
    c = ir.deployment(spec).executors[label].container
    assert (c.resources.accelerator.resource_type, c.resources.accelerator.resource_count) \
        == (resource, count)
    env = {e.name: e.value for e in c.env}
    assert env["KFP_GPU_KIND"] == (gpu or "fraction").split(":")[0]
    cfg = ir.k8s_config(platform, label)
    # KAI gives the fraction to the named container: KFP's component container is "main"
    # (Argo's "wait" comes first).
    assert dict(cfg.pod_metadata.annotations) == annotations
    assert [(t.key, t.operator, t.effect) for t in cfg.tolerations] == \
        [("nvidia.com/gpu", "Exists", "NoSchedule")]
    # the CPU-only tasks carry no GPU settings
    for task in ("plan-shards", "combine-shards"):
        assert not ir.container(spec, task).resources.accelerator.resource_type


def test_checked_in_yaml_names_the_kfp_main_container():
    """KAI hands a fraction to container 0 unless the pod names one; in a KFP (Argo) pod
    container 0 is ``wait``, the component runs in ``main``."""
    from pathlib import Path

    import yaml
    docs = list(yaml.safe_load_all(
        (Path(__file__).parents[2] / "pipelines" / "fractional_eval.yaml").read_text()))
    platform = next(d for d in docs if "platforms" in d)
    annotations = [cfg["podMetadata"]["annotations"] for cfg in
                   platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
                   if "gpu-fraction" in cfg.get("podMetadata", {}).get("annotations", {})]
    assert annotations and all(a["gpu-fraction-container-name"] == "main" for a in annotations)


def test_invalid_request_fails_at_build():
    with pytest.raises(ValueError, match="0 < F < 1"):
        fe.build("fraction:1.5")
    with pytest.raises(ValueError, match=">= 1"):
        fe.build(shards=0)
    assert fe.default_gpu(3) == "fraction:0.333333"
    assert fe.default_gpu(1) == "gpu:1"  # one shard: a whole GPU, not gpu-fraction 1


# ------------------------------------------ the shard count against the compiled fraction
@pytest.mark.parametrize("k", [*range(1, 40), 97, 99, 100, 128, 1000])
def test_the_shards_one_gpu_holds_invert_the_default_fraction(k):
    """gpu_for(K) writes 1/K with 6 digits (1/6 -> 0.166667, a little more than 1/6);
    shards_per_gpu reads K back from it, and K + 1 shards never fit."""
    from kfp_gpu.gpu import parse

    request = parse(shards.gpu_for(k))
    if k == 1:
        assert request.kind == "gpu" and request.count == 1
        return
    assert shards.shards_per_gpu(request.fraction) == k
    shards.check_fits(k, request.fraction)
    with pytest.raises(ValueError, match=f"accepted is num_shards <= {k},"):
        shards.check_fits(k + 1, request.fraction)


def test_a_count_that_needs_more_than_one_gpu_is_refused_in_one_line():
    with pytest.raises(errors.InputError) as refused:
        shards.check_fits(8, 0.25)
    assert str(refused.value) == (
        "num_shards=8 does not fit the GPU fraction this pipeline was compiled with: 8 "
        "shards x gpu-fraction 0.25 = 2 GPUs, and its shards share one GPU; accepted is "
        "num_shards <= 4, or compile for 8 shards (kfp-gpu compile -o DIR --only "
        "fractional-eval --gpu fraction:0.125)")
    shards.check_fits(3, 0.25)  # fewer: each keeps 0.25, the rest of the GPU stays free
    shards.check_fits(64, 0.0)  # not a fraction (gpu:1, MIG, ...): any count


@pytest.mark.parametrize("gpu, shards_k, default, fraction", [
    (None, None, 4, 0.25), (None, 3, 3, 0.333333), ("fraction:0.125", None, 8, 0.125),
    ("fraction:0.3", None, 3, 0.3), ("fraction:0.5", 1, 1, 0.5),
    ("gpu:1", None, 4, 0.0), ("mig:1g.10gb,model=H100-80GB", 16, 16, 0.0),
])
def test_build_derives_the_default_count_and_compiles_the_fraction_for_plan_shards(
        gpu, shards_k, default, fraction):
    """The default num_shards fits the fraction (a fraction alone sets it); plan-shards
    gets the fraction the shard tasks are annotated with, which check_spec reads."""
    from kfp_gpu.dsl import parameters as declared

    spec = declared.spec_of(fe.build(gpu, shards=shards_k))
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["num_shards"]["defaultValue"] == default
    assert fe.compiled_fraction(spec) == fraction
    fe.check_spec(spec, {})  # the compiled default fits
    if fraction:
        fe.check_spec(spec, {"num_shards": shards.shards_per_gpu(fraction)})
        with pytest.raises(errors.InputError, match="does not fit the GPU fraction"):
            fe.check_spec(spec, {"num_shards": shards.shards_per_gpu(fraction) + 1})
    else:
        fe.check_spec(spec, {"num_shards": 1000})


def test_build_refuses_a_default_count_its_fraction_cannot_hold():
    with pytest.raises(ValueError, match=r"num_shards=4 does not fit .* <= 2,"):
        fe.build("fraction:0.5", shards=4)


def test_the_checked_in_yaml_gives_plan_shards_the_annotated_fraction():
    from pathlib import Path

    import yaml
    docs = list(yaml.safe_load_all(
        (Path(__file__).parents[2] / "pipelines" / "fractional_eval.yaml").read_text()))
    platform = next(d for d in docs if "platforms" in d)
    (annotated,) = [float(cfg["podMetadata"]["annotations"]["gpu-fraction"]) for cfg in
                    platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
                    if "gpu-fraction" in cfg.get("podMetadata", {}).get("annotations", {})]
    assert fe.compiled_fraction(docs[0]) == annotated == 1 / fe.DEFAULT_SHARDS


def test_plan_shards_refuses_too_many_shards_with_an_input_record(tmp_path, capsys):
    """The component body (a run started from the KFP UI is not checked by kfp-gpu):
    refused before any shard task, with the record submit --wait reads (exit 2)."""
    from types import SimpleNamespace

    from kfp_gpu.components.plan_shards.component import plan_shards
    from kfp_gpu.training import datasets

    datasets.save(np.zeros((10, 2), np.int32), np.zeros(10, np.int32), tmp_path / "d")
    data = SimpleNamespace(path=str(tmp_path / "d"))
    assert plan_shards.python_func(test_data=data, num_shards=4, gpu_fraction=0.25) \
        == [0, 1, 2, 3]
    with pytest.raises(errors.InputError, match="num_shards=5 does not fit"):
        plan_shards.python_func(test_data=data, num_shards=5, gpu_fraction=0.25)
    (line,) = capsys.readouterr().err.splitlines()
    rec = errors.record_of(line)
    assert rec["input_error"] and rec["message"].startswith("num_shards=5 does not fit")


@pytest.mark.usefixtures("kfp_client_env")
def test_submit_checks_num_shards_against_the_yaml_it_would_upload(tmp_path):
    """Against the KFP API double (tests/doubles/kfp_api.py): the catalog YAML (0.25 per
    shard) refuses num_shards=8 before anything is uploaded; a YAML compiled for 8 shards
    (``--gpu fraction:0.125``) runs it."""
    import typer
    from typer.testing import CliRunner

    from kfp_gpu.cli import submit as submit_cli
    from kfp_gpu.compiler import compile as comp
    from tests.doubles.kfp_api import FakeKfp

    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    uris = ["-p", "model_uri=minio://mlpipeline/m", "-p", "test_data_uri=minio://mlpipeline/d"]
    with FakeKfp() as kfp:
        res = CliRunner().invoke(app, ["fractional-eval", "--host", kfp.url, *uris,
                                       "-p", "num_shards=8"])
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            ("error: num_shards=8 does not fit the GPU fraction this pipeline was compiled "
             "with: 8 shards x gpu-fraction 0.25 = 2 GPUs, and its shards share one GPU; "
             "accepted is num_shards <= 4, or compile for 8 shards (kfp-gpu compile -o DIR "
             "--only fractional-eval --gpu fraction:0.125)")]
        assert not kfp.pipelines and not kfp.runs  # refused before any upload
        (built,) = [w for w in comp.compile_all(tmp_path, "fraction:0.125", "fractional-eval")
                    if w.suffix == ".yaml" and "pipelines" in w.parts]
        res = CliRunner().invoke(app, [str(built), "--host", kfp.url, "--version", "v8", *uris,
                                       "-p", "num_shards=8"])
        assert res.exit_code == 0, res.output
        (run,) = kfp.runs.values()
        assert run["runtime_config"]["parameters"]["num_shards"] == 8
        res = CliRunner().invoke(app, [str(built), "--host", kfp.url, "--version", "v8", *uris,
                                       "-p", "num_shards=9"])
        assert res.exit_code == 2 and "accepted is num_shards <= 8," in res.output
        assert len(kfp.runs) == 1


@pytest.fixture(scope="module")
def small_model(imdb_small, tmp_path_factory):
    """A small Embedding->LSTM->Dense(sigmoid) trained one epoch on 2,000 real reviews."""
    from kfp_gpu.components.train_text_classifier import train as tr

    d = tmp_path_factory.mktemp("fe_model")
    cfg = tr.TrainConfig(epochs=1, batch_size=64, embedding_dim=16, lstm_units=16, seed=7)
    tr.train(cfg, train_path=imdb_small["train"], model_dir=str(d / "model"),
             checkpoint_dir=str(d / "ckpt"), tensorboard_dir=str(d / "tb"))
    return str(d / "model")


@dsl.pipeline(name="whole-set-eval")
def whole_set_eval(model_uri: str, test_data_uri: str) -> Metrics:
    m = dsl.importer(artifact_uri=model_uri, artifact_class=Model)
    d = dsl.importer(artifact_uri=test_data_uri, artifact_class=Dataset)
    return evaluate_classifier(model=m.output, test_data=d.output,
                               accuracy_threshold=0.0).outputs["metrics"]


@pytest.mark.slow
def test_local_run_on_real_imdb_equals_single_task_evaluation(imdb_small, small_model,
                                                              tmp_path):
    """kfp.local, real TensorFlow: 3 uneven shards of the real IMDB test subset, each under
    ``fraction:0.333333`` (a logged no-op cap on CPU), combined == one evaluate_classifier."""
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=str(tmp_path / "root"), raise_on_error=True)
    run = fe.build(shards=3)(model_uri=small_model, test_data_uri=imdb_small["test"],
                             accuracy_threshold=0.0)
    combined = dict(run.outputs["metrics"].metadata)
    assert run.outputs["passed"] is True
    ref = dict(whole_set_eval(model_uri=small_model,
                              test_data_uri=imdb_small["test"]).output.metadata)
    y_true, y_score = ev.predict(small_model, imdb_small["test"])
    rows = len(y_true)
    assert combined["rows"] == ref["rows"] == rows
    assert combined["shards"] == 3
    for key in ("accuracy", "precision", "recall", "f1"):
        assert combined[key] == ref[key], key  # counts of the same predictions: exact
    for key in ("roc_auc", "loss"):
        # per-row scores may differ in the last float32 bits between batch shapes
        assert math.isclose(combined[key], ref[key], rel_tol=1e-6, abs_tol=1e-7), key
    # and the same numbers straight from the library on the whole set
    assert combined["accuracy"] == ev.compute_metrics(y_true, y_score)["accuracy"]
