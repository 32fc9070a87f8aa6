"""The kfp-gpu CLI: compile / run argument handling and errors (no training here)."""

import pytest
from typer.testing import CliRunner

from kfp_gpu.catalog import arguments, params
from kfp_gpu.cli import app
from kfp_gpu.local import run as local_run

runner = CliRunner()


def test_compile_check_passes_on_the_checked_in_yaml():
    r = runner.invoke(app, ["compile", "--check"])
    assert r.exit_code == 0, r.output
    assert "current" in r.output


def test_compile_to_an_output_dir_with_a_gpu_request(tmp_path):
    r = runner.invoke(app, ["compile", "--gpu", "fraction:0.5", "--only", "imdb-lstm",
                            "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "pipelines" / "imdb_lstm.yaml").read_text()
    assert "gpu-fraction" in text and "0.5" in text


@pytest.mark.parametrize("args,msg", [
    (["compile", "--only", "nope"], "accepted"),
    (["compile", "--check", "--gpu", "gpu:1"], "takes no --gpu"),
    (["compile", "--gpu", "fraction:1.5", "-o", "/tmp/x"], "fraction"),
    (["run", "imdb-lstm"], "kfp-gpu submit"),
    (["run", "nope", "--local"], "unknown pipeline"),
    (["run", "imdb-lstm", "--local", "-p", "bogus=1"], "unknown parameter 'bogus'"),
    (["run", "imdb-lstm", "--local", "-p", "epochs"], "key=value"),
    (["run", "imdb-lstm", "--local", "-p", "epochs=two"], "parameter epochs"),
    (["run", "imdb-lstm", "--local", "--data-dir", "/nonexistent"], "not found"),
])
def test_bad_invocations_fail_with_a_clear_error(args, msg):
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    assert msg in r.output


def test_typed_params_follow_the_pipeline_declaration():
    types = {k: p.type for k, p in params.declared("imdb-lstm").items()}
    typed = arguments.typed({"epochs": "3", "dropout": "0.2", "mixed_precision": "yes",
                             "source": "x.csv"}, types)
    assert typed == {"epochs": 3, "dropout": 0.2, "mixed_precision": True, "source": "x.csv"}
    with pytest.raises(ValueError, match="not a boolean"):
        arguments.typed({"mixed_precision": "maybe"}, types)


def test_data_dir_selects_the_real_data(shared_data):
    assert local_run.default_data_params("imdb-lstm", str(shared_data)) == {
        "source": str(shared_data / "imdb" / "imdb_50k.csv.gz")}
    assert local_run.default_data_params("fractional-eval", str(shared_data)) == {}


def test_gpu_or_registry_without_output_dir_is_refused():
    r = runner.invoke(app, ["compile", "--gpu", "gpu:2"])
    assert r.exit_code == 2 and "--output-dir" in r.output


def test_check_refuses_a_non_default_registry(monkeypatch):
    monkeypatch.setenv("KFP_GPU_REGISTRY", "registry.example.com/ml")
    r = runner.invoke(app, ["compile", "--check"])
    assert r.exit_code == 2 and "unset it" in r.output
