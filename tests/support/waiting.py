"""Polling until something happens, for tests: the one poll loop (:func:`wait_for`) and
the one reader of a process's output up to a line (:func:`wait_for_line`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T], timeout: float = 10.0, what: str = "condition",
             interval: float = 0.02) -> T:
    """Call ``fn`` every ``interval`` seconds until it returns something truthy; return
    that, or raise AssertionError after ``timeout`` seconds naming ``what`` and the last
    value."""
    end = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def wait_for_line(proc: subprocess.Popen, marker: str, timeout: float = 300) -> list[str]:
    """Read ``proc``'s stdout (text mode) line by line until a line contains ``marker``;
    return the lines read so far. Raises AssertionError (showing them) after ``timeout``
    seconds or when the output ends first."""
    seen, deadline = [], time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if marker in line:
            return seen
        assert time.monotonic() < deadline, seen
    raise AssertionError(f"{marker!r} never came: {seen}")
