"""SIGINT/SIGTERM for the local runs: stop the whole process tree, then say what was kept.

kfp.local starts each task with ``subprocess.Popen`` in the CLI's own process group
(kfp 2.17 ``kfp/local/subprocess_task_handler.py`` ``run_local_subprocess``: no
``start_new_session``), so a SIGTERM sent to the CLI's pid alone (as a CI runner sends it)
reaches no task, and a shell's Ctrl-C reaches them in no order. :func:`guard` installs one
handler for both signals which

1. stops every descendant of this process (:func:`stop_tree`: SIGTERM, up to
   ``grace_s`` seconds, then SIGKILL; the process is made a child subreaper first
   (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``, man 2 prctl) so a task whose shell parent died
   first is still found as a descendant and reaped);
2. calls ``on_interrupt`` (e.g. remove the run's containers);
3. raises :class:`Interrupted` in the main thread, as Python raises KeyboardInterrupt.

Descendants come from psutil (``Process.children(recursive=True)``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

#: Seconds the tree gets between SIGTERM and SIGKILL.
GRACE_S = 10.0
#: prctl option number (linux/prctl.h ``PR_SET_CHILD_SUBREAPER``).
_PR_SET_CHILD_SUBREAPER = 36


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread after SIGINT/SIGTERM once the process tree is stopped.

    Attributes:
        signum: the signal received.
        exit_code: ``128 + signum`` (130 SIGINT, 143 SIGTERM: the shell convention).
        kept: what the run kept (filled by the caller that knows, e.g. finished tasks).
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
        self.kept: list[str] = []

    def message(self) -> str:
        """``interrupted (SIGTERM): kept a, b`` -- one line for the terminal."""
        kept = ", ".join(self.kept) if self.kept else "nothing"
        return f"interrupted ({signal.Signals(self.signum).name}): kept {kept}"


def descendants(pid: int | None = None) -> list[int]:
    """Live descendant pids of ``pid`` (default: this process), zombies excluded
    (psutil ``Process.children(recursive=True)``)."""
    import psutil

    try:
        tree = psutil.Process(os.getpid() if pid is None else pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
    return out


def _reap() -> None:
    """Collect the exit status of every finished child (no zombies left behind)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_tree(grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every descendant, wait up to ``grace_s`` s (new ones get SIGTERM too), then
    SIGKILL what is left; reap them all.

    Returns:
        The pids that were still there after ``grace_s`` (killed with SIGKILL).
    """
    deadline = time.monotonic() + grace_s
    termed: set[int] = set()
    while True:
        _reap()
        left = descendants()
        if not left:
            return []
        if time.monotonic() >= deadline:
            _signal_all(left, signal.SIGKILL)
            for _ in range(50):
                _reap()
                if not descendants():
                    break
                time.sleep(0.1)
            return left
        new = [p for p in left if p not in termed]
        _signal_all(new, signal.SIGTERM)
        termed.update(new)
        time.sleep(0.1)


def _subreaper(on: bool) -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


@contextlib.contextmanager
def guard(on_interrupt: Callable[[], None] | None = None,
          grace_s: float = GRACE_S) -> Iterator[None]:
    """Within the ``with``, SIGINT/SIGTERM stop the process tree and raise
    :class:`Interrupted`; the previous handlers come back afterwards. A second signal while
    the tree is being stopped is ignored (the stop is bounded by ``grace_s``). Outside the
    main thread (signals go to it only) nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _subreaper(True)
    busy = False

    def handler(signum, frame):
        nonlocal busy
        if busy:
            return
        busy = True
        stop_tree(grace_s)
        if on_interrupt is not None:
            with contextlib.suppress(Exception):
                on_interrupt()
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _subreaper(False)
