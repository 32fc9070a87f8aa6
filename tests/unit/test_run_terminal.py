"""The terminal view of `kfp-gpu run --local`: short by default, every line kept per task.

One line per task start/end with its time, progress lines, the summary;
no executor JSON or TensorFlow C++ lines on the terminal; each task's full log in a file.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kfp_gpu.local import log as run_log

ROOT = Path(__file__).resolve().parents[2]

# What kfp.local prints (kfp/local/logging_utils.py colours the task names).
LINES = [
    "08:23:07.168 - INFO - Executing task \x1b[96m'prep-text'\x1b[0m",
    "    [KFP Executor 2026-11-23 08:23:09,130 INFO]: Got executor_input:",
    '    {"inputs": {"parameterValues": {"maxlen": 80}}}',
    "    [KFP Executor 2026-11-23 08:23:09,130 INFO]: read 50000 rows from /data/imdb.csv.gz",
    "2026-11-23 08:23:09.5: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on",
    ("08:23:10.000 - INFO - Task \x1b[96m'prep-text'\x1b[0m finished with status "
    "\x1b[92mSUCCESS\x1b[0m"),
    "08:23:10.100 - INFO - Executing task 'train'",
    ("    INFO kfp_gpu.components.train_text_classifier.train: epoch 1 step 200/782 loss "
    "0.5, ETA 40 s"),
    "    some noise",
    "    Traceback (most recent call last):",
    "    ValueError: boom",
    "08:23:20.000 - INFO - Task 'train' finished with status FAILURE",
]


def feed(stream: run_log.TaskLogStream, lines: list[str]) -> None:
    for line in lines:
        stream.write(line + "\n")
    stream.close()


def test_short_view_and_per_task_files(tmp_path):
    term = io.StringIO()
    s = run_log.TaskLogStream(tmp_path, term)
    feed(s, LINES)
    shown = term.getvalue().splitlines()
    assert shown[0] == "[prep-text] started"
    assert "[prep-text]   read 50000 rows from /data/imdb.csv.gz" in shown
    assert any(line.startswith("[prep-text] success in ") for line in shown)
    assert "[train]   epoch 1 step 200/782 loss 0.5, ETA 40 s" in shown
    assert not any("executor_input" in x or "parameterValues" in x or "oneDNN" in x
                   for x in shown[:4])
    # A failed task ends in one line here; its error, input and log are the caller's to
    # show (kfp_gpu.local.run.TaskFailed): no traceback on the terminal.
    assert shown[-1].startswith("[train] failure in ")
    assert not any("Traceback" in x or "boom" in x for x in shown)
    assert s.tail("train")[-2:] == ["    ValueError: boom",
                                     ("08:23:20.000 - INFO - Task 'train' finished with status "
                                      "FAILURE")]
    assert s.results["prep-text"][0] == "SUCCESS" and s.results["train"][0] == "FAILURE"
    prep_log = (tmp_path / "prep-text.log").read_text()
    assert "Got executor_input" in prep_log and "oneDNN" in prep_log
    assert "\x1b[" not in prep_log
    assert "some noise" in (tmp_path / "train.log").read_text()


def test_verbose_shows_everything(tmp_path):
    term = io.StringIO()
    feed(run_log.TaskLogStream(tmp_path, term, verbose=True), LINES)
    assert term.getvalue().splitlines() == LINES
    assert "parameterValues" in (tmp_path / "prep-text.log").read_text()


def test_captured_restores_the_streams(tmp_path):
    out, err = sys.stdout, sys.stderr
    with run_log.captured(tmp_path) as s:
        print("08:00:00.000 - INFO - Executing task 'a'")
        print("hidden line")
    assert sys.stdout is out and sys.stderr is err
    assert "hidden line" in (tmp_path / "a.log").read_text()
    assert s.results == {}


@pytest.mark.slow
def test_make_run_output_fits_one_screen(tmp_path, shared_data):
    """The real CLI on 1,000 reviews per split, 1 epoch: a screenful, task logs kept."""
    env = {**os.environ, "KFP_GPU_DATA_DIR": str(shared_data)}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("kfp-gpu")), "run", "imdb-lstm", "--local",
         "-p", "epochs=1", "-p", "max_rows_per_split=1000"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    for task in ("prep-text", "train-text-classifier", "evaluate-classifier"):
        assert f"[{task}] started" in lines
        assert any(x.startswith(f"[{task}] success in ") for x in lines)
    text = "\n".join(lines)
    assert "executor_input" not in text and "tensorflow/core" not in text
    assert "shuffle=True" not in text
    assert any(x.startswith("test accuracy: ") for x in lines)
    log_dir = Path(next(x for x in lines if x.startswith("task logs: ")).split(": ", 1)[1])
    assert "Got executor_input" in (log_dir / "train-text-classifier.log").read_text()
    report = next(x for x in lines if x.startswith("report: open ")).split("file://", 1)[1]
    assert report.endswith(".html") and "<img" in Path(report).read_text()


def _summary(tmp_path, train_meta):
    model = tmp_path / "model"
    model.mkdir()
    return {"pipeline": "p", "seconds": 1.0, "pipeline_root": str(tmp_path),
            "log_dir": str(tmp_path / "logs"),
            "outputs": {"train_metrics": {"uri": str(tmp_path / "no-file"), "metadata": train_meta},
                        "model": {"uri": str(model), "metadata": {}},
                        "eval_metrics": {"uri": str(tmp_path / "none"),
                                         "metadata": {"accuracy": 0.5}},
                        "Output": 3}}


def test_summary_names_only_existing_paths_in_a_stable_order(tmp_path):
    """Metadata-only artifacts have a uri but no file; outputs sorted."""
    lines = run_log.summary_lines(_summary(tmp_path, {"samples_per_sec": 10.0}))
    assert f"  model: {tmp_path / 'model'}" in lines
    assert not any("train_metrics" in x or "eval_metrics:" in x for x in lines)
    outputs = [x.split(":")[0].strip() for x in lines if x.startswith("  ")]
    assert outputs == sorted(outputs) == ["Output", "model"]
    assert "test accuracy: 0.5000" in lines  # no invented ROC AUC/F1/rows


def test_summary_prints_only_measured_figures(tmp_path):
    """resnet-horovod measures samples/sec and ms/step, not s/epoch: no "0.0 s/epoch"."""
    lines = run_log.summary_lines(_summary(tmp_path, {"samples_per_sec": 812.4,
                                                      "ms_per_step": 39.4}))
    assert "training: 812 samples/sec, 39.4 ms/step" in lines
    assert not any("s/epoch" in x for x in lines)


@pytest.mark.parametrize("dest", ["/dev/null/x.json", "{tmp}", "{tmp}/missing/x.json"])
def test_summary_json_destination_refused_before_the_run(tmp_path, dest):
    """Exit 2 with one line, and no task ran (no log folder)."""
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app

    res = CliRunner().invoke(app, ["run", "imdb-lstm", "--local", "--pipeline-root",
                                   str(tmp_path / "root"), "--summary-json",
                                   dest.format(tmp=tmp_path)])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "--summary-json" in lines[0], res.output
    assert not (tmp_path / "root").exists()


def test_pipeline_root_that_cannot_be_created_is_refused(tmp_path):
    from kfp_gpu.local import run as local_run

    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="--pipeline-root"):
        local_run.check_writable_dir(tmp_path / "file" / "root", "--pipeline-root")
    with pytest.raises(ValueError, match="not a folder"):
        local_run.check_writable_dir(tmp_path / "file", "--pipeline-root")
    local_run.check_writable_dir(tmp_path / "new" / "root", "--pipeline-root")


def test_write_summary_is_atomic(tmp_path, monkeypatch):
    from kfp_gpu.local import run as local_run

    dest = tmp_path / "s.json"
    dest.write_text('{"old": 1}')
    with pytest.raises(TypeError):
        local_run.write_summary(dest, {"bad": object.__new__(type("X", (), {"__str__": None}))})
    assert dest.read_text() == '{"old": 1}' and os.listdir(tmp_path) == ["s.json"]
    local_run.write_summary(dest, {"pipeline": "p"})
    assert '"pipeline": "p"' in dest.read_text()


def test_runner_docker_without_an_engine_is_one_line_exit_3(tmp_path):
    """The engine is pinged before any task (was ~480 lines)."""
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app

    res = CliRunner().invoke(app, ["run", "imdb-lstm", "--local", "--runner", "docker",
                                   "--pipeline-root", str(tmp_path / "root")],
                             env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert res.exit_code == 3, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "no Docker engine answers" in lines[0], res.output
