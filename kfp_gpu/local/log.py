"""The terminal view of a local pipeline run: short by default, every line kept in files.

kfp.local (kfp/local/subprocess_task_handler.py ``run_local_subprocess``) prints each task
process's combined stdout/stderr line by line with ``print``, and its logger
(kfp/local/logging_utils.py ``local_logger_context``) writes "Executing task 'x'",
"Task 'x' finished with status SUCCESS", the executor input/output and every output
artifact to ``sys.stdout``. :class:`TaskLogStream` stands in for ``sys.stdout`` and
``sys.stderr`` while a pipeline runs: it writes every line to ``<log_dir>/<task>.log``
(the task taken from kfp.local's "Executing task" marker; lines outside a task go to
``pipeline.log``) and passes to the terminal only

- one line when a task starts and one when it ends, with its wall time and status;
- progress lines the components log for people (``epoch N step i/n ... ETA``,
  ``epoch N done in ...``, ``prep: ... reviews/s``), prefixed with the task name;
- on a failed task, one line ``[task] failure in N s``; the error itself is the caller's
  to show (:class:`kfp_gpu.local.run.TaskFailed`: the error's own line, the input, the log),
  read from the record line the component left (:mod:`kfp_gpu.inputs.errors`), kept in
  :attr:`TaskLogStream.failures`.

With ``verbose=True`` every line reaches the terminal (tracebacks included), and a failed
task's last :data:`FAIL_TAIL` log lines are not repeated.

kfp.local runs the iterations of a ``dsl.ParallelFor`` in threads under one task name: the
stream keeps lines apart per thread and names each iteration by its index, read from the
executor's output path (``evaluate-shard #2``, log ``evaluate-shard-2.log``), so the K shard
tasks of ``fractional-eval`` show their own start, end and wall time.
"""

from __future__ import annotations

import io
import re
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from kfp_gpu.inputs import errors

#: ANSI colour sequences kfp.local puts around task and pipeline names.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TASK_START = re.compile(r"Executing task '([^']+)'")
TASK_END = re.compile(r"Task '([^']+)' finished with status (\w+)")
#: The executor input's output file: ``.../for-loop-1-iteration-<i>/<task>/...`` in a
#: ``dsl.ParallelFor`` (kfp/local/orchestrator/enhanced_dag_orchestrator.py names the
#: iterations ``<task>-iteration-<i>``), ``.../<task>/...`` otherwise.
OUTPUT_FILE = re.compile(r'"outputFile": "[^"]*?(?:-iteration-(\d+))?/[^/"]+/executor_output')
#: The executor's last line of a task that succeeded (kfp/dsl/executor.py). kfp.local's
#: "Task ... finished" line can be lost when ParallelFor iterations run in threads: its
#: logger context swaps the root logger's handlers globally (kfp/local/logging_utils.py
#: ``local_logger_context``), so one iteration's exit can drop another's handler.
WROTE_OUTPUT = "Wrote executor output file to"
#: Lines of a task shown by default: the progress lines our components log.
PROGRESS = re.compile(r"(epoch \d+ (step \d+/\d+|done in)|read \d+ rows)")
#: Lines of a failed task's log that :meth:`TaskLogStream.tail` returns.
FAIL_TAIL = 30


class TaskLogStream(io.TextIOBase):
    """A text stream that files every line per task and shows a short view.

    Args:
        log_dir: folder for ``<task>.log`` and ``pipeline.log`` (created).
        terminal: where the short view goes (the real ``sys.stdout``).
        verbose: pass every line to ``terminal`` as well.
    """

    def __init__(self, log_dir: Path, terminal: TextIO, *, verbose: bool = False):
        super().__init__()
        self.log_dir, self.terminal, self.verbose = Path(log_dir), terminal, verbose
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # kfp.local runs a ParallelFor's iterations in threads (at most 2), each printing
        # its task's lines: a partial line, the current task and the lines seen before the
        # task's label is known are kept per thread; one lock orders the output.
        self._lock = threading.RLock()
        self._bufs: dict[int, str] = {}
        self._tasks: dict[int, str | None] = {}
        self._pending: dict[int, list[str]] = {}
        self._started: dict[str, float] = {}
        self._files: dict[str, TextIO] = {}
        self.results: dict[str, tuple[str, float]] = {}
        #: Task -> the record its component left when it failed (kfp_gpu.inputs.errors).
        self.failures: dict[str, dict] = {}

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            me = threading.get_ident()
            buf = self._bufs.get(me, "") + text
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                self._line(line)
            self._bufs[me] = buf
        return len(text)

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()
        self.terminal.flush()

    def close(self) -> None:
        for me, buf in list(self._bufs.items()):
            if buf:
                self._tasks.setdefault(threading.get_ident(), self._tasks.get(me))
                self._line(buf)
        self._bufs.clear()
        for me in list(self._pending):  # a task whose label was still open
            self._label(me, self._name(me), None)
        for f in self._files.values():
            f.close()
        self._files.clear()

    def log_path(self, task: str | None) -> Path:
        """``<log_dir>/<task>.log`` (``evaluate-shard #2`` -> ``evaluate-shard-2.log``), or
        ``pipeline.log`` for lines outside a task."""
        return self.log_dir / f"{(task or 'pipeline').replace(' #', '-')}.log"

    def _file(self, task: str | None) -> TextIO:
        key = task or "pipeline"
        if key not in self._files:
            self._files[key] = open(self.log_path(task), "a", encoding="utf-8")  # noqa: SIM115
        return self._files[key]

    def _show(self, text: str) -> None:
        self.terminal.write(text + "\n")
        self.terminal.flush()

    def _line(self, raw: str) -> None:
        line, me = ANSI.sub("", raw), threading.get_ident()
        start, end = TASK_START.search(line), TASK_END.search(line)
        if start:  # its label (ParallelFor index or not) is known a few lines later
            self._tasks[me] = None
            self._pending[me] = []
            self._started[f"\0{me}"] = time.perf_counter()
        if me in self._pending:
            self._pending[me].append(raw)
            found = OUTPUT_FILE.search(line)
            if found or end or PROGRESS.search(line) or len(self._pending[me]) > 400:
                self._label(me, start.group(1) if start else self._name(me), found)
            return
        self._task_line(me, raw, line, end)

    def _name(self, me: int) -> str:
        first = TASK_START.search(ANSI.sub("", self._pending[me][0]))
        return first.group(1) if first else "task"

    def _label(self, me: int, name: str, found) -> None:
        """Name the thread's task (``evaluate-shard #2`` for iteration 2 of a ParallelFor),
        show its start, and pass on the lines held back."""
        index = found.group(1) if found else None
        task = f"{name} #{index}" if index is not None else name
        self._tasks[me] = task
        self._started[task] = self._started.pop(f"\0{me}", time.perf_counter())
        if not self.verbose:
            self._show(f"[{task}] started")
        held = self._pending.pop(me)
        for raw in held:
            line = ANSI.sub("", raw)
            self._task_line(me, raw, line, TASK_END.search(line))

    def _task_line(self, me: int, raw: str, line: str, end) -> None:
        task = self._tasks.get(me)
        self._file(task).write(line + "\n")
        record = errors.record_of(line)
        if record is not None and task:
            self.failures[task] = record
        if self.verbose:
            self._show(raw)
        if end and task:
            self._task_end(task, end.group(2))
            self._tasks[me] = None
        elif task and WROTE_OUTPUT in line:
            self._task_end(task, "SUCCESS")
        elif task and not self.verbose and PROGRESS.search(line):
            self._show(f"[{task}]   {_strip_level(line)}")

    def _task_end(self, task: str, status: str) -> None:
        if self.results.get(task, ("",))[0] == status:
            return  # already ended by its executor's last line
        seconds = time.perf_counter() - self._started.get(task, time.perf_counter())
        self.results[task] = (status, seconds)
        self._file(task).flush()
        if not self.verbose:
            self._show(f"[{task}] {status.lower()} in {seconds:.1f} s")

    def tail(self, task: str, lines: int = FAIL_TAIL) -> list[str]:
        """The last ``lines`` lines of ``task``'s log file (empty if there is none)."""
        path = self.log_path(task)
        if not path.is_file():
            return []
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def _strip_level(line: str) -> str:
    """``[KFP Executor <time> INFO]: message`` or ``INFO kfp_gpu.x: message`` -> ``message``."""
    line = re.sub(r"^\s*\[KFP Executor [^\]]*\]:\s*", "", line)
    return re.sub(r"^\s*(DEBUG|INFO|WARNING|ERROR) [\w.]+: ", "", line)


class captured:
    """Route ``sys.stdout``/``sys.stderr`` through a :class:`TaskLogStream` in a ``with``.

    Example::

        with run_log.captured(Path("local_outputs/logs/run-1")) as stream:
            pipeline(**kwargs)
        stream.results  # {"prep-text": ("SUCCESS", 4.2), ...}
    """

    def __init__(self, log_dir: Path, *, verbose: bool = False):
        self.log_dir, self.verbose = log_dir, verbose

    def __enter__(self) -> TaskLogStream:
        self._saved = sys.stdout, sys.stderr
        self.stream = TaskLogStream(self.log_dir, sys.stdout, verbose=self.verbose)
        sys.stdout = sys.stderr = self.stream
        return self.stream

    def __exit__(self, *exc) -> None:
        sys.stdout, sys.stderr = self._saved
        self.stream.close()


def _shard_lines(tasks: dict) -> list[str]:
    """One line per ParallelFor task: ``evaluate-shard: #0 success 5.5 s, #1 ...``."""
    loops: dict[str, list[tuple[int, str]]] = {}
    for task, (status, seconds) in tasks.items():
        name, sep, index = task.partition(" #")
        if sep and index.isdigit():
            loops.setdefault(name, []).append(
                (int(index), f"#{index} {status.lower()} {seconds:.1f} s"))
    return [f"{name}: " + ", ".join(t for _, t in sorted(runs)) for name, runs in
            sorted(loops.items())]


def _path_exists(uri: str) -> bool:
    return bool(uri) and Path(uri).exists()


def summary_lines(s: dict) -> list[str]:
    """The run summary of :func:`kfp_gpu.local.run.run`'s result, as terminal lines:
    outputs in name order; an artifact's path only when a file or folder
    is there (KFP gives metadata-only artifacts such as ``system.Metrics`` a ``uri`` but
    writes no file: kfp/dsl/types/artifact_types.py); training figures only when measured
    (``samples_per_sec``, ``seconds_per_epoch``, ``ms_per_step`` present in the training
    metrics), one line per ``dsl.ParallelFor`` task with each iteration's index, status and
    time (``evaluate-shard: #0 success 5.5 s, ...``), each HTML report last. The accuracy
    line comes from ``eval_metrics`` (imdb-lstm, resnet-horovod) or ``metrics``
    (fractional-eval's combined metrics).
    """
    out = s["outputs"]
    lines = [f"\n{s['pipeline']}: finished in {s['seconds']} s",
             f"artifacts under {s['pipeline_root']}"]
    if s.get("log_dir"):
        lines.append(f"task logs: {s['log_dir']}")
    for key in sorted(out):
        value = out[key]
        if key == "report":
            continue  # shown last, as the file to open
        if isinstance(value, dict) and "uri" in value:
            if _path_exists(value["uri"]):
                lines.append(f"  {key}: {value['uri']}")
        else:
            lines.append(f"  {key}: {value}")
    # the evaluation's metrics: imdb-lstm's eval_metrics, fractional-eval's combined metrics
    ev = next((m for m in ((out.get(k) or {}).get("metadata", {}) for k in
                           ("eval_metrics", "metrics")) if "accuracy" in m), {})
    tr = (out.get("train_metrics") or {}).get("metadata", {})
    if "accuracy" in ev:
        extra = [f"{label} {ev[k]:.4f}" for k, label in (("roc_auc", "ROC AUC"), ("f1", "F1"))
                 if k in ev]
        if "rows" in ev:
            extra.append(f"{int(ev['rows'])} examples")
        lines.append(f"test accuracy: {ev['accuracy']:.4f}"
                     + (f"  ({', '.join(extra)})" if extra else ""))
    figures = [fmt.format(tr[k]) for k, fmt in (("samples_per_sec", "{:.0f} samples/sec"),
                                                 ("seconds_per_epoch", "{:.1f} s/epoch"),
                                                 ("ms_per_step", "{:.1f} ms/step"))
               if isinstance(tr.get(k), int | float) and tr[k] > 0]
    if figures:
        lines.append("training: " + ", ".join(figures))
    lines += _shard_lines(s.get("tasks", {}))
    for key in sorted(out):
        value = out[key]
        if isinstance(value, dict) and value.get("html"):
            lines.append(f"{key}: open file://{value['html']}")
    return lines
