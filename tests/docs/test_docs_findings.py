"""Findings of a newcomer's read of the docs, fixed at their root: one data folder, the
trainer's missing input in one line, the fractional-eval summary, help that reads like
kubectl's, the benchmarks' imports. The docs' own blocks run in tests/docs/test_docs_run.py."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from kfp_gpu.cli import app, helptext
from kfp_gpu.inputs import datadir
from kfp_gpu.local import log as run_log
from kfp_gpu.local import run as local_run

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


# ---------------------------------------------------------------- 3: the data folder
def test_the_default_data_folder_is_the_one_the_readme_names(monkeypatch, shared_data):
    monkeypatch.delenv(datadir.ENV, raising=False)
    assert datadir.checkout() == REPO
    assert datadir.default() == (REPO / "../shared/data").resolve()
    assert datadir.resolve() == datadir.default()
    monkeypatch.setenv(datadir.ENV, str(shared_data))
    assert datadir.resolve() == shared_data
    assert datadir.resolve("/elsewhere") == Path("/elsewhere")


def test_every_pipeline_finds_its_data_in_the_default_folder(monkeypatch):
    """Without --data-dir or $KFP_GPU_DATA_DIR: imdb-lstm and resnet-horovod both read
    ../shared/data (resnet-horovod failed with FileNotFoundError before)."""
    monkeypatch.delenv(datadir.ENV, raising=False)
    if not (datadir.default() / "imdb").is_dir():
        pytest.skip("no ../shared/data beside this checkout (the data is elsewhere)")
    assert local_run.default_data_params("imdb-lstm", None) == {
        "source": str(datadir.default() / "imdb/imdb_50k.csv.gz")}
    assert local_run.default_data_params("resnet-horovod", None) == {
        "source": str(datadir.default() / "fashion-mnist")}


def test_the_trainer_reads_fashion_mnist_from_the_same_folder(monkeypatch, shared_data):
    from kfp_gpu.training import resnet_data

    monkeypatch.setenv(datadir.ENV, str(shared_data))
    data = resnet_data.load_source(resnet_data.FASHION_MNIST)
    assert data.x_train.shape[1:] == (28, 28, 1) and data.classes == 10
    monkeypatch.setenv(datadir.ENV, "/nonexistent")
    with pytest.raises(FileNotFoundError, match=r"/nonexistent/fashion-mnist not found .*"
                       r"comes from \$KFP_GPU_DATA_DIR"):
        resnet_data.load_source(resnet_data.FASHION_MNIST)


def test_a_given_folder_without_the_data_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"\(data dir .*\); the data dir comes from "
                       "--data-dir"):
        local_run.default_data_params("imdb-lstm", str(tmp_path))


# ---------------------------------------------------------------- 7: one line, no traceback
def test_train_resnet_refuses_missing_data_in_one_line_before_tensorflow():
    r = runner.invoke(app, ["train-resnet", "--mode", "train", "--data", "/nonexistent"])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "/nonexistent not found" in r.output


# ---------------------------------------------------------------- 8: fractional-eval summary
def _executor_lines(task: str, iteration: int | None) -> list[str]:
    where = f"for-loop-1-iteration-{iteration}/" if iteration is not None else ""
    return [f"12:00:00.000 - INFO - Executing task '{task}'",
            "    [KFP Executor 2026 INFO]: Looking for component",
            f'        "outputFile": "/r/fe/{where}{task}/executor_output.json"',
            "    [KFP Executor 2026 INFO]: Wrote executor output file to /r/x.json"]


def test_parallel_iterations_get_their_index_their_own_log_and_time(tmp_path):
    """Two threads print two iterations interleaved, one line in two writes; kfp.local's
    "finished" line of one is lost (its logger race): each still ends, with its index."""
    term = io.StringIO()
    stream = run_log.TaskLogStream(tmp_path, term)
    lines = {1: _executor_lines("evaluate-shard", 1), 0: _executor_lines("evaluate-shard", 0)}
    lines[0].append("12:00:05.000 - INFO - Task 'evaluate-shard' finished with status SUCCESS")
    go = [threading.Event(), threading.Event()]

    def worker(i: int) -> None:
        for n, line in enumerate(lines[i]):
            go[i].wait(5)
            go[i].clear()
            stream.write(line[:10])
            stream.write(line[10:] + "\n")
            go[1 - i].set()
            if n == len(lines[i]) - 1:
                go[1 - i].set()

    threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    go[1].set()
    for t in threads:
        t.join(10)
    stream.close()
    shown = term.getvalue().splitlines()
    for i in (0, 1):
        assert f"[evaluate-shard #{i}] started" in shown
        assert any(s.startswith(f"[evaluate-shard #{i}] success in ") for s in shown)
        log = (tmp_path / f"evaluate-shard-{i}.log").read_text()
        assert f"iteration-{i}/" in log and f"iteration-{1 - i}/" not in log
    assert set(stream.results) == {"evaluate-shard #0", "evaluate-shard #1"}


def test_the_summary_shows_combined_metrics_and_each_shard():
    summary = {"pipeline": "fractional-eval", "seconds": 30.1, "pipeline_root": "/r",
               "log_dir": "/r/logs/x", "tasks": {"plan-shards": ["SUCCESS", 0.3],
                                                 "evaluate-shard #1": ["SUCCESS", 5.5],
                                                 "evaluate-shard #0": ["SUCCESS", 6.0]},
               "outputs": {"passed": False, "metrics": {"uri": "/nonexistent", "metadata": {
                   "accuracy": 0.5467, "roc_auc": 0.568, "f1": 0.6746, "rows": 300.0}}}}
    lines = run_log.summary_lines(summary)
    assert "  passed: False" in lines
    assert "test accuracy: 0.5467  (ROC AUC 0.5680, F1 0.6746, 300 examples)" in lines
    assert "evaluate-shard: #0 success 6.0 s, #1 success 5.5 s" in lines


# ---------------------------------------------------------------- 9: help like kubectl's
def _commands(command, path="kfp-gpu"):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}")


def _help_of_every_command() -> list[tuple[str, str]]:
    root = typer.main.get_command(app)
    return [(path, runner.invoke(app, [*path.split()[1:], "--help"], terminal_width=100).output)
            for path, _ in _commands(root)]


def test_help_has_no_docstring_sections_markup_or_flag_placeholders():
    for path, text in _help_of_every_command():
        for bad in ("Raises:", "Args:", "Returns:", ":data:`", ":mod:`", ":func:`", "``",
                    "<bool>"):
            assert bad not in text, f"`{path} --help` shows {bad!r}:\n{text}"


def test_clean_drops_sections_and_roles_and_joins_paragraphs():
    doc = ("Run it; exit 0 ok.\n\nMore text\nwrapped here.\n\nRaises:\n    typer.Exit: with a "
           "code\n        (continued).\n\nUses :data:`EXIT_X` and ``code``.")
    assert helptext.clean(doc) == ("Run it; exit 0 ok.\n\nMore text wrapped here.\n\n"
                                   "Uses `EXIT_X` and `code`.")


@pytest.mark.parametrize("module", ["kfp_gpu.cli.train_resnet", "kfp_gpu.mpi.launch.launcher"])
def test_module_help_is_clean(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr and ":data:" not in r.stdout
    assert "--help" in r.stdout


def test_a_compile_warning_is_one_line_per_cause(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kfp_gpu", "compile", "--gpu",
                        "hami:1,mem=8000,cores=30", "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("warning: hami on a KFP task"), warnings


def test_packaging_check_runs_outside_the_checkout(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kfp_gpu.compiler.packaging", "--check"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


# ---------------------------------------------------------------- 10: benchmarks' imports
@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "benchmarks").glob("*.py")))
def test_benchmarks_that_load_tensorflow_import_kfp_gpu_first(script):
    """protobuf 6 lacks MessageFactory.GetPrototype, which TensorFlow 2.18 calls at import;
    importing kfp_gpu first restores it (kfp_gpu/_compat.py)."""
    lines = (REPO / "benchmarks" / script).read_text(encoding="utf-8").splitlines()
    tf = [n for n, ln in enumerate(lines) if re.search(
        r"^\s*(import tensorflow|from tensorflow)|__import__\(.tensorflow.\)", ln)]
    ours = [n for n, ln in enumerate(lines) if re.match(r"\s*(import|from) kfp_gpu\b", ln)]
    if tf:
        assert ours and ours[0] < tf[0], (
            f"benchmarks/{script} loads TensorFlow (line {tf[0] + 1}) before kfp_gpu")
