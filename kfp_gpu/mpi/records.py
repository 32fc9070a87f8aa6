"""What the launcher records and reports: the MPIJob's identity, its phase, the outcome.

Conditions are mpi-operator ``v2beta1`` JobConditions (``pkg/apis/kubeflow/v2beta1/
types.go``: Created, Running, Restarting, Suspended, Succeeded, Failed).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kfp_gpu.mpi import crd

log = logging.getLogger(__name__)

TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ResourceRecord:
    """What the launcher writes first: the Kubernetes identity of the MPIJob."""

    apiVersion: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, obj: Mapping) -> ResourceRecord:
        meta = obj.get("metadata", {})
        return cls(obj.get("apiVersion", crd.API_VERSION), obj.get("kind", crd.KIND),
                   meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: str | os.PathLike) -> ResourceRecord | None:
        """The record at ``path``, or ``None`` if there is none (or it is empty/garbled)."""
        p = Path(path)
        if not p.is_file() or p.stat().st_size == 0:
            return None
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            return cls(**{k: str(d[k]) for k in ("apiVersion", "kind", "namespace", "name",
                                                  "uid")})
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable resource record %s", path)
            return None


@dataclass
class LaunchResult:
    """A Succeeded MPIJob.

    Attributes:
        record: the MPIJob's identity.
        status: ``"Succeeded"``.
        conditions: the final ``status.conditions`` (list of JobCondition dicts).
        log_tail: the last launcher log lines (str, without newlines).
        reattached: True if an MPIJob of an earlier attempt was re-used.
    """

    record: ResourceRecord
    status: str
    conditions: list[dict]
    log_tail: list[str]
    reattached: bool = False


class MPIJobFailed(RuntimeError):
    """The MPIJob reached ``Failed`` (or vanished); carries reason, message and log tail."""

    def __init__(self, name: str, reason: str, message: str, log_tail: Sequence[str] = (),
                 events: Sequence[str] = ()):
        self.name, self.reason, self.message = name, reason, message
        self.log_tail, self.events = list(log_tail), list(events)
        text = f"MPIJob {name} failed: {reason}: {message}"
        if self.events:
            text += "\nevents:\n  " + "\n  ".join(self.events)
        if self.log_tail:
            text += f"\nlast {len(self.log_tail)} launcher log lines:\n  " + "\n  ".join(
                self.log_tail)
        super().__init__(text)


class LaunchCancelled(RuntimeError):
    """The run was cancelled (SIGTERM); the MPIJob was deleted."""


def condition(obj: Mapping, ctype: str) -> dict | None:
    """The ``status.conditions`` entry of type ``ctype`` with status ``"True"``, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def phase(obj: Mapping) -> str:
    """The job's phase from its conditions: the terminal one if any, else the latest True
    one (Created/Running/Restarting/Suspended), else ``"Pending"``."""
    for t in TERMINAL:
        if condition(obj, t):
            return t
    conds = [c for c in (obj.get("status") or {}).get("conditions") or []
             if c.get("status") == "True"]
    return conds[-1]["type"] if conds else "Pending"
