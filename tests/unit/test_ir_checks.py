"""kfp_gpu.compiler.ir_checks: compiled pipelines the KFP 2.17.0 backend cannot run are refused
at compile time; every catalog pipeline, for every GPU kind it accepts, passes."""

# no `from __future__ import annotations`: kfp reads the components' annotations
import copy
import tempfile
import warnings
from pathlib import Path

import pytest
import yaml
from kfp import compiler, dsl
from kfp.dsl import Dataset, Input

from kfp_gpu import gpu
from kfp_gpu.catalog import discover as registry
from kfp_gpu.compiler import compile as comp
from kfp_gpu.compiler import ir_checks

#: One request per kind of kfp_gpu.gpu (each kind of kfp_gpu/gpu/kinds/).
REQUESTS = {"none": "none", "gpu": "gpu:1", "mig": "mig:1g.10gb", "shared": "shared:1",
            "fraction": "fraction:0.5", "gpu-memory": "gpu-memory:8192",
            "metagpu": "metagpu:25", "hami": "hami:1,mem=8000", "dra": "dra:gpu=1"}


def test_every_kind_has_a_request():
    assert sorted(REQUESTS) == sorted(gpu.KINDS)
    assert all(gpu.parse(text).kind == kind for kind, text in REQUESTS.items())


@dsl.component(base_image="python:3.11")
def _read(data: Input[Dataset]) -> str:
    return data.uri


@dsl.component(base_image="python:3.11")
def _uri() -> str:
    return "gs://b/x"


def _compiled(pipeline, tmp_path) -> dict:
    out = tmp_path / "p.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    return next(yaml.safe_load_all(out.read_text()))


def test_an_importer_with_a_display_name_read_downstream_is_refused(tmp_path):
    @dsl.pipeline(name="p")
    def p(uri: str):
        imp = dsl.importer(artifact_uri=uri, artifact_class=Dataset)
        imp.set_display_name("import-data")
        _read(data=imp.output)

    spec = _compiled(p, tmp_path)
    (found,) = ir_checks.problems(spec)
    assert (found.task, found.pattern) == ("root/importer", "importer-display-name")
    assert "11173" in found.upstream and "importer_launcher.go" in found.upstream
    assert "'import-data'" in found.why and 'producer task "importer_<dag' in found.why
    with pytest.raises(ValueError, match=r"^pipeline 'p' cannot run on a KFP 2\.17\.0 "
                       r"backend: task root/importer: importer-display-name") as e:
        ir_checks.check(spec, "p")
    assert "\n" not in str(e.value)


def test_the_same_importer_without_a_display_name_or_a_reader_passes(tmp_path):
    @dsl.pipeline(name="p")
    def plain(uri: str):
        _read(data=dsl.importer(artifact_uri=uri, artifact_class=Dataset).output)

    @dsl.pipeline(name="p")
    def unread(uri: str):
        dsl.importer(artifact_uri=uri, artifact_class=Dataset).set_display_name("import-data")

    assert ir_checks.problems(_compiled(plain, tmp_path)) == []
    assert ir_checks.problems(_compiled(unread, tmp_path)) == []


def test_a_container_task_with_a_display_name_passes(tmp_path):
    """Container tasks get the key as --task_name (argocompiler/container.go)."""
    @dsl.pipeline(name="p")
    def p(uri: str):
        first = _uri().set_display_name("make-uri")
        _read(data=dsl.importer(artifact_uri=uri, artifact_class=Dataset).output).after(first)

    assert ir_checks.problems(_compiled(p, tmp_path)) == []


def test_an_importer_uri_from_a_task_output_is_refused(tmp_path):
    @dsl.pipeline(name="p")
    def p():
        _read(data=dsl.importer(artifact_uri=_uri().output, artifact_class=Dataset).output)

    (found,) = ir_checks.problems(_compiled(p, tmp_path))
    assert found.pattern == "importer-uri-source" and "taskOutputParameter" in found.why


def test_an_importer_inside_a_parallel_for_is_refused(tmp_path):
    @dsl.pipeline(name="p")
    def p(uri: str):
        with dsl.ParallelFor([1, 2]):
            _read(data=dsl.importer(artifact_uri=uri, artifact_class=Dataset).output)

    found = ir_checks.problems(_compiled(p, tmp_path))
    assert [(f.task, f.pattern) for f in found] == [("comp-for-loop-2/importer",
                                                     "importer-in-loop")]
    assert found[0].upstream == "kubeflow/pipelines issue 10860"


def test_an_importer_under_a_condition_and_other_executors_are_refused(tmp_path):
    @dsl.pipeline(name="p")
    def p(uri: str):
        _read(data=dsl.importer(artifact_uri=uri, artifact_class=Dataset).output)

    spec = _compiled(p, tmp_path)
    cond = copy.deepcopy(spec)  # the SDK puts conditions on sub-DAGs; a hand-made IR may not
    cond["root"]["dag"]["tasks"]["importer"]["triggerPolicy"] = {"condition": "true"}
    assert [f.pattern for f in ir_checks.problems(cond)] == ["importer-condition"]
    custom = copy.deepcopy(spec)
    (reader,) = [k for k in custom["root"]["dag"]["tasks"] if k != "importer"]
    ref = custom["root"]["dag"]["tasks"][reader]["componentRef"]["name"]
    label = custom["components"][ref]["executorLabel"]
    custom["deploymentSpec"]["executors"][label] = {"customJob": {"customJob": {}}}
    (found,) = ir_checks.problems(custom)
    assert (found.task, found.pattern) == (f"root/{reader}", "executor-kind")


def _catalog_cases():
    for name in registry.PIPELINES:
        for kind, text in REQUESTS.items():
            yield pytest.param(name, text, id=f"{name}-{kind}")


@pytest.mark.parametrize(("name", "request_text"), list(_catalog_cases()))
def test_every_catalog_pipeline_passes_for_every_kind_it_accepts(name, request_text):
    (target,) = comp.targets(only=name)
    build = registry.entry(target.name).build
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hami / dra warnings: what a task cannot carry
        try:
            pipeline = build(request_text)
        except ValueError:
            pytest.skip(f"{name} does not accept {request_text}")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "p.yaml"
            compiler.Compiler().compile(pipeline, str(path))
            docs = list(yaml.safe_load_all(path.read_text()))
        assert ir_checks.problems(docs) == []
        comp.compile_text(target, request_text)  # the compiler's own call passes too


def test_compile_refuses_a_pipeline_the_backend_cannot_run(monkeypatch, tmp_path):
    """compile_text runs the check: the old fractional-eval (display names on its importers)
    is refused with the one-line ValueError the CLI turns into exit 2."""
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app

    (target,) = comp.targets(only="fractional-eval")
    real = registry.entry(target.name).build
    orig = dsl.importer

    def named_importer(**kw):
        return orig(**kw).set_display_name("import-x")

    monkeypatch.setattr(dsl, "importer", named_importer)
    with pytest.raises(ValueError, match="importer-display-name.*11173"):
        comp.compile_text(target)
    res = CliRunner().invoke(app, ["compile", "--only", "fractional-eval", "--output-dir",
                                   str(tmp_path / "out")])
    assert res.exit_code == 2 and "importer-display-name" in res.output
    assert not (tmp_path / "out").exists()  # nothing written
    assert real is registry.entry(target.name).build
