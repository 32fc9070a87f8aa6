"""The figures a chaos scenario prints for docs/reliability.md: one ``FIGURES`` line with the
date, the CPU model (/proc/cpuinfo ``model name``) and its core count, the command that
ran, and the measured values."""

from __future__ import annotations

import datetime
import os
import shlex
import sys
from collections.abc import Mapping


def cpu_model() -> str:
    """``model name`` of /proc/cpuinfo (``unknown`` elsewhere) and the cores this process
    may use."""
    name = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {len(os.sched_getaffinity(0))} cores"


def line(scenario: str, values: Mapping[str, object]) -> str:
    """``FIGURES <scenario>: k=v, ... | <date> | <cpu> | <command>`` (floats to 0.1)."""
    shown = ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in values.items())
    command = shlex.join(["pytest", *sys.argv[1:]]) if sys.argv else "pytest"
    return (f"FIGURES {scenario}: {shown} | {datetime.date.today().isoformat()} | "
            f"{cpu_model()} | {command}")
