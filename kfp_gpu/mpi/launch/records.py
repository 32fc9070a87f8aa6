"""What the launcher records and reports: the MPIJob's identity, its phase, the outcome.

Conditions are mpi-operator ``v2beta1`` JobConditions (``pkg/apis/kubeflow/v2beta1/
types.go``: Created, Running, Restarting, Suspended, Succeeded, Failed) or, for a TrainJob,
Kubeflow Trainer's (Suspended, Complete, Failed); :func:`phase` normalises both
(:meth:`kfp_gpu.mpi.spec.backends.Backend.phase`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from kfp_gpu.mpi.spec import crd

TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ResourceRecord:
    """What the launcher writes as the task's output: the Kubernetes identity of the job
    (written, never read back: re-attach is by name and 409, :mod:`kfp_gpu.mpi.launch.attach`)."""

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
    """The job (an MPIJob, or a TrainJob: ``kind``) reached ``Failed`` (or vanished);
    carries reason, message and log tail."""

    def __init__(self, name: str, reason: str, message: str, log_tail: Sequence[str] = (),
                 events: Sequence[str] = (), kind: str = crd.KIND):
        self.name, self.reason, self.message, self.kind = name, reason, message, kind
        self.log_tail, self.events = list(log_tail), list(events)
        text = f"{kind} {name} failed: {reason}: {message}"
        if self.events:
            text += "\nevents:\n  " + "\n  ".join(self.events)
        if self.log_tail:
            text += f"\nlast {len(self.log_tail)} launcher log lines:\n  " + "\n  ".join(
                self.log_tail)
        super().__init__(text)


class PendingTimeout(MPIJobFailed):
    """The job did not start within ``pending_timeout_s`` (:mod:`kfp_gpu.mpi.launch.pending`);
    ``reason``/``message`` say why (``Unschedulable: 0/8 nodes are available: ...``). The
    launcher deleted the job."""


class NodeLost(MPIJobFailed):
    """A pod of the job was deleted from a node that stopped answering (the taint
    manager's ``DeletionByTaintManager``, :mod:`kfp_gpu.mpi.launch.node_lost`): the job
    cannot go on and no operator fails it while the node is away. The launcher deleted the
    job."""


class LaunchCancelled(RuntimeError):
    """The run was cancelled (SIGTERM); the MPIJob was deleted."""


def condition(obj: Mapping, ctype: str) -> dict | None:
    """The ``status.conditions`` entry of type ``ctype`` with status ``"True"``, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def phase(obj: Mapping) -> str:
    """The job's normalised phase (:meth:`kfp_gpu.mpi.spec.backends.Backend.phase` of the
    backend its apiVersion/kind names; an object of another kind is read as an MPIJob):
    ``Succeeded``/``Failed`` from the kind's terminal conditions, else Suspended, the latest
    True condition (Created/Running/Restarting), a TrainJob's Created/Running from its
    ``jobsStatus``, else ``"Pending"``."""
    from kfp_gpu.mpi.spec import backends

    try:
        backend = backends.for_object(obj)
    except ValueError:
        backend = backends.MPIJOB
    return backend.phase(obj)


def failure(obj: Mapping) -> dict | None:
    """The True failure condition of ``obj`` (``Failed`` for both kinds), or None."""
    return condition(obj, "Failed")


def suspended_note(obj: Mapping, kind: str = "MPIJob") -> str:
    """What a ``Suspended`` job waits for, in words: Kueue's queue when the job carries its
    label (``kueue.x-k8s.io/queue-name``, kubernetes-sigs/kueue
    ``pkg/controller/constants/constants.go``; Kueue admits the job by clearing
    ``suspend``), else the suspend flag a user set. Either way the pending timeout does not
    run while the job is suspended (:class:`kfp_gpu.mpi.launch.pending.PendingGuard`)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    queue = labels.get(crd.KUEUE_QUEUE_LABEL)
    if queue:
        return (f"waiting for quota in queue {queue} (Kueue admits the {kind} by unsuspending "
                "it; not counted against pending_timeout_s)")
    return (f"suspended ({'runPolicy.suspend' if kind == 'MPIJob' else 'spec.suspend'} is "
            "true); waiting until it is resumed, not counted against pending_timeout_s")
