"""KAI Scheduler / Run:ai fractions: ``fraction:F`` (pod annotation ``gpu-fraction: "F"``)
and ``gpu-memory:MiB`` (annotation ``gpu-memory: "MiB"``), no accelerator limit; the queue
(any kind, :class:`KaiQueue`) is a pod label (``kai.scheduler/queue``, or ``runai/queue`` on
Run:ai via ``queue-label=``). Upstream: NVIDIA/KAI-Scheduler docs ``docs/gpu-sharing``. The scheduler
itself is chosen outside the pod spec KFP writes (namespace default / admission webhook)."""

import math
from dataclasses import dataclass

from kfp_gpu.gpu.kinds.base import ACCEPTED, Kind, num, parse_int
from kfp_gpu.gpu.names import (
    DEFAULT_QUEUE_LABEL,
    FRACTION_ANNOTATION,
    MEMORY_ANNOTATION,
)


@dataclass(frozen=True)
class KaiQueue:
    """The scheduling queue: label ``label`` = ``name`` on the pod ("" name = no label).

    KAI groups every pod it schedules, of any resource kind, and reads the queue from the
    top owner's or the pod's label (NVIDIA/KAI-Scheduler
    pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go
    ``CalcPodGroupQueue``; key ``kai.scheduler/queue``, Run:ai ``runai/queue``), so every
    request kind takes ``queue=`` / ``queue-label=``.
    """

    name: str = ""
    label: str = DEFAULT_QUEUE_LABEL

    def labels(self) -> dict[str, str]:
        return {self.label: self.name} if self.name else {}

    def options(self) -> list[str]:
        """The text-form options (``queue=Q[,queue-label=K]``)."""
        if not self.name:
            return []
        label = [f"queue-label={self.label}"] if self.label != DEFAULT_QUEUE_LABEL else []
        return [f"queue={self.name}", *label]


#: Options every kind accepts (they build the :class:`KaiQueue`).
QUEUE_OPTIONS = frozenset({"queue", "queue-label"})


def queue_from(opts: dict[str, str]) -> KaiQueue:
    """The queue of parsed options; raises ValueError for a label without a queue name."""
    if "queue-label" in opts and not opts.get("queue"):
        raise ValueError("queue-label= needs queue=NAME")
    return KaiQueue(opts.get("queue", ""), opts.get("queue-label", DEFAULT_QUEUE_LABEL))


def _valid_fraction(f) -> bool:
    """0 < F < 1: KAI's admission refuses gpu-fraction >= 1 (a whole GPU is ``gpu:1``;
    NVIDIA/KAI-Scheduler pkg/.../gpu_sharing validation, see /docs/gpu-sharing.md)."""
    return isinstance(f, (int, float)) and math.isfinite(f) and 0.0 < f < 1.0


class _Kai(Kind):
    names_container = True

    def share(self, r):
        return 1.0

    def gpus_per_pod(self, r):
        return 1


class Fraction(_Kai):
    name = "fraction"

    def parse(self, value, opts):
        try:
            f = float(value)
        except ValueError:
            f = float("nan")
        if not _valid_fraction(f):
            raise ValueError(f"fraction must be a number with 0 < F < 1 (KAI rejects "
                             f"gpu-fraction >= 1), got {value!r}; for whole GPUs use "
                             f"'gpu:N'; {ACCEPTED}")
        return {"kind": "fraction", "fraction": f}

    def validate(self, r):
        if not _valid_fraction(r.fraction):
            raise ValueError(f"fraction must be a number with 0 < F < 1 (KAI rejects "
                             f"gpu-fraction >= 1), got {r.fraction!r}; for whole GPUs use "
                             "'gpu:N'")

    def share(self, r):
        return float(r.fraction)

    def annotations(self, r):
        return {FRACTION_ANNOTATION: num(r.fraction)}

    def text(self, r):
        return num(r.fraction), []


class GpuMemory(_Kai):
    name = "gpu-memory"

    def parse(self, value, opts):
        return {"kind": "gpu-memory", "memory_mib": parse_int(self.name, "MiB", value, lo=1)}

    def validate(self, r):
        if r.memory_mib < 1:
            raise ValueError(f"gpu-memory: MiB must be an integer >= 1, got {r.memory_mib!r}")

    def annotations(self, r):
        return {MEMORY_ANNOTATION: str(r.memory_mib)}

    def text(self, r):
        return str(r.memory_mib), []


FRACTION = Fraction()
GPU_MEMORY = GpuMemory()
