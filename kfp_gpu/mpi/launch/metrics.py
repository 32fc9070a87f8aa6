"""The trainer's figures as the launcher sees them: the ``METRICS {json}`` log line, the
scalars for a KFP ``Metrics`` artifact, and weak-scaling efficiency (its one definition)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence

_METRICS_LINE = re.compile(r"METRICS (\{.*\})\s*$")


def metrics_from_log(lines: Sequence[str]) -> dict | None:
    """The trainer's final metrics from launcher log lines, or ``None``.

    The trainer (:mod:`kfp_gpu.training.horovod_train`, rank 0) prints one line
    ``METRICS {json}`` at the end (keys such as ``img_per_sec_per_gpu``,
    ``img_per_sec_total``, ``world_size``, ``ms_per_step``); mpirun may prefix it
    (``--tag-output``: ``[1,0]<stdout>:``). The last such line wins.
    """
    for line in reversed(list(lines)):
        m = _METRICS_LINE.search(line)
        if m:
            with contextlib.suppress(ValueError):
                out = json.loads(m.group(1))
                if isinstance(out, dict):
                    return out
    return None


def scaling_efficiency(img_per_sec_total: float, world_size: int,
                       single_img_per_sec: float) -> float:
    """Weak-scaling efficiency: ``total / (world_size * single)`` (1.0 = linear).

    Args:
        img_per_sec_total: images/sec of all ranks together.
        world_size: number of ranks (GPUs).
        single_img_per_sec: images/sec of one rank alone (same batch per GPU).

    Raises:
        ValueError: for a non-positive world size or baseline.
    """
    if world_size < 1 or single_img_per_sec <= 0:
        raise ValueError("world_size must be >= 1 and single_img_per_sec > 0")
    return float(img_per_sec_total) / (world_size * float(single_img_per_sec))


def kfp_metrics(metrics: Mapping, single_img_per_sec: float | None = None) -> dict[str, float]:
    """The scalar figures to log on a KFP ``Metrics`` artifact (name -> float).

    Keeps the numeric (non-bool) top-level values of the trainer's metrics; with a single-rank
    baseline it adds ``scaling_efficiency``. Example: ``for k, v in
    kfp_metrics(m).items(): metrics_artifact.log_metric(k, v)``.
    """
    out = {k: float(v) for k, v in metrics.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool)}
    add_scaling_efficiency(out, single_img_per_sec)
    return out


def add_scaling_efficiency(out: dict[str, float], single_img_per_sec: float | None) -> None:
    """Set ``out["scaling_efficiency"]`` when ``out`` has ``img_per_sec_total`` and a
    non-zero ``world_size`` and a positive one-rank baseline is given (else leave ``out``)."""
    if single_img_per_sec and single_img_per_sec > 0 and "img_per_sec_total" in out \
            and out.get("world_size"):
        out["scaling_efficiency"] = scaling_efficiency(
            out["img_per_sec_total"], int(out["world_size"]), single_img_per_sec)
