"""Every checked-in compiled YAML: strictly parsed, current, GPU request readable."""

from __future__ import annotations

import pytest

from kfp_gpu.catalog import discover as registry
from kfp_gpu.compiler import compile as comp
from tests.support import ir

TARGETS = comp.targets()


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_strict_parse(target):
    spec, platform = ir.load(target.path)
    assert spec.pipeline_info.name == target.name.replace("_", "-")
    ir.deployment(spec)  # executors parse strictly too
    if platform is not None:
        for executor in platform.platforms["kubernetes"].deployment_spec.executors:
            assert executor in ir.deployment(spec).executors
            ir.k8s_config(platform, executor)


def test_checked_in_yaml_is_current():
    assert comp.check_all() == []


def test_each_compiled_yaml_is_one_catalog_entry_and_no_copy():
    """Every component.yaml under components/ is a catalog component's own (no folder keeps
    a copy of another's spec under an old name), and no two are the same text."""
    compiled = {t.path.resolve() for t in TARGETS}
    on_disk = set(comp.package_dir("components").glob("*/component.yaml"))
    assert {p.resolve() for p in on_disk} <= compiled
    texts = [t.path.read_text(encoding="utf-8") for t in TARGETS if t.kind == "component"]
    assert len(set(texts)) == len(texts)


def test_check_detects_a_stale_file(tmp_path, monkeypatch):
    t = comp.targets(only="prep_text")[0]
    stale = tmp_path / "component.yaml"
    stale.write_text(t.path.read_text().replace("maxlen", "max_len", 1))
    monkeypatch.setattr(comp, "targets", lambda out=None, only=None: [
        comp.Target(t.kind, t.name, t.ref, stale)])
    problems = comp.check_all()
    assert len(problems) == 1 and "stale" in problems[0] and "max_len" in problems[0]


def test_imdb_lstm_requests_one_whole_gpu_on_the_train_task_only():
    spec, platform = ir.load(comp.targets(only="imdb-lstm")[0].path)
    c = ir.container(spec, "train-text-classifier")
    assert (c.resources.accelerator.resource_type, c.resources.accelerator.resource_count) == (
        "nvidia.com/gpu", "1")
    assert c.resources.resource_cpu_request == "4"
    assert c.resources.resource_memory_limit == "8G"
    k8s = ir.k8s_config(platform, ir.executor_label(spec, "train-text-classifier"))
    tol = [(x.key, x.operator, x.effect) for x in k8s.tolerations]
    assert tol == [("nvidia.com/gpu", "Exists", "NoSchedule")]
    for task in ("prep-text", "evaluate-classifier"):
        assert not ir.container(spec, task).resources.accelerator.resource_type
    assert c.image.endswith(":0.1.0") and "kfp-gpu-trainer" in c.image


def test_compile_with_another_gpu_and_registry(tmp_path):
    # the registry is an argument: no environment, no module reloads
    comp.compile_all(tmp_path, gpu="gpu:2", only="imdb-lstm", registry="registry.example.com/ml")
    spec, _ = ir.load(tmp_path / "pipelines" / "imdb_lstm.yaml")
    c = ir.container(spec, "train-text-classifier")
    assert c.resources.accelerator.resource_count == "2"
    assert c.image == "registry.example.com/ml/kfp-gpu-trainer:0.1.0"


def test_another_registry_needs_an_output_folder():
    with pytest.raises(ValueError, match="output folder"):
        comp.compile_all(None, registry="registry.example.com/ml")


def test_catalog_entries_resolve():
    for name in registry.COMPONENTS:
        assert callable(registry.component(name))
    for name in registry.PIPELINES:
        assert callable(registry.entry(name).build)


def test_train_resnet_horovod_runs_on_the_trainer_image():
    # Cluster mode stages the Datasets (kfp_gpu.training.datasets.load_arrays imports TensorFlow),
    # and the launcher image has no TensorFlow (its Dockerfile asserts that): the
    # component must run on the trainer image (TF + kfp-gpu + kubernetes client).
    for name in ("train_resnet_horovod", "resnet-horovod"):
        spec, _ = ir.load(comp.targets(only=name)[0].path)
        execs = ir.deployment(spec).executors
        images = [e.container.image for k, e in execs.items() if "train-resnet-horovod" in k]
        assert images and all("/kfp-gpu-trainer:" in i for i in images), images


def test_doctor_still_sees_the_mpijob_in_the_resnet_pipeline():
    import yaml

    from kfp_gpu.cluster import doctor
    path = comp.targets(only="resnet-horovod")[0].path
    assert doctor.needs_from_pipeline(list(yaml.safe_load_all(path.read_text()))).mpi


def test_imdb_lstm_evaluates_in_large_batches():
    """The evaluation of the small text model predicts 1,024 reviews per batch (the
    component's generic default, 256, stays for image models on GPU shares)."""
    from pipelines.imdb_lstm import EVAL_BATCH_SIZE

    spec, _ = ir.load(comp.targets(only="imdb-lstm")[0].path)
    task = spec.root.dag.tasks["evaluate-classifier"]
    batch = task.inputs.parameters["batch_size"].runtime_value.constant.number_value
    assert batch == EVAL_BATCH_SIZE == 1024
