"""Adding a pipeline is one object in one file: a toy ``PipelineEntry`` put beside the
catalog is compiled, run on this machine, listed by ``params`` and typed by ``submit``, and
its ``-p`` values are parsed once per command (docs/architecture.md, "Add a pipeline")."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu.catalog import arguments, discover
from kfp_gpu.cli.app import app

TOY = textwrap.dedent('''
    """A toy pipeline: one CPU task that repeats a word."""
    from kfp import dsl

    from kfp_gpu.dsl.entry import PipelineEntry
    from kfp_gpu.dsl.parameters import check_signature, declare, documented, integer, text
    from kfp_gpu.gpu import parse

    _PARAMETERS = declare(integer("times", "repetitions", 1, 5),
                          text("word", "the word", required=True))


    @dsl.component(base_image="python:3.11", install_kfp_package=False)
    def repeat(word: str, times: int) -> str:
        return " ".join([word] * times)


    def build(gpu: str = "none", settings=None):
        parse(gpu)

        @dsl.pipeline(name="toy-echo")
        @documented(_PARAMETERS)
        def toy_echo(word: str = "hi", times: int = 2) -> str:
            return repeat(word=word, times=times).output

        check_signature(_PARAMETERS, toy_echo)
        return toy_echo


    ENTRY = PipelineEntry(name="toy-echo", build=build, parameters=_PARAMETERS,
                          default_gpu="none")
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module in a package of its own, found by the catalog's own discovery."""
    pkg = tmp_path / "toy_pipelines"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "toy_echo.py").write_text(TOY)
    (pkg / "_helpers.py").write_text("ENTRY = None  # private modules are skipped\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover.discover_pipelines(pkg, package="toy_pipelines")
    assert found == {"toy-echo": "toy_pipelines.toy_echo"}
    monkeypatch.setattr(discover, "PIPELINES", {**discover.PIPELINES, **found})
    return tmp_path


@pytest.fixture
def parses(monkeypatch):
    """Every -p value parsed, counted (kfp_gpu.catalog.arguments.coerce)."""
    seen = []
    real = arguments.coerce

    def counted(raw, ptype):
        seen.append(raw)
        return real(raw, ptype)

    monkeypatch.setattr(arguments, "coerce", counted)
    return seen


def test_a_new_entry_is_compiled_listed_and_typed(toy, parses):
    runner = CliRunner()
    out = toy / "out"
    res = runner.invoke(app, ["compile", "--only", "toy-echo", "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    spec = yaml.safe_load((out / "pipelines" / "toy_echo.yaml").read_text())
    assert spec["pipelineInfo"]["name"] == "toy-echo"
    assert set(spec["root"]["inputDefinitions"]["parameters"]) == {"word", "times"}

    res = runner.invoke(app, ["params", "toy-echo"])
    assert res.exit_code == 0, res.output
    assert "repetitions" in res.output and "an integer in [1, 5]" in res.output

    from kfp_gpu.cluster import submit

    assert submit.arguments("toy-echo", spec, ["times=3", "word=yo"]) == {"times": 3,
                                                                         "word": "yo"}
    assert parses == ["3", "yo"]  # once each: by the declaration, not again by the spec
    with pytest.raises(ValueError, match=r"times.*\[1, 5\]"):
        submit.arguments("toy-echo", spec, ["times=9"])


def test_a_new_entry_runs_here_with_each_value_parsed_once(toy, parses, monkeypatch):
    monkeypatch.chdir(toy)
    res = CliRunner().invoke(app, ["run", "toy-echo", "--local", "-p", "times=3", "-p",
                                   "word=yo", "--pipeline-root", str(toy / "root")])
    assert res.exit_code == 0, res.output
    assert "yo yo yo" in res.output
    assert sorted(parses) == ["3", "yo"]
    res = CliRunner().invoke(app, ["run", "toy-echo", "--local", "-p", "times=0"])
    assert res.exit_code == 2 and "an integer in [1, 5]" in res.output
