"""train_resnet_horovod results: rank 0's metrics (``metrics.json`` or the launcher log's
``METRICS`` line) and the scalars of the KFP Metrics artifact. Pure except
:func:`read_metrics_file` (reads gs:// or a shared-volume path)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from kfp_gpu.inputs import storage
from kfp_gpu.mpi.launch.metrics import add_scaling_efficiency

log = logging.getLogger(__name__)


#: Keys both rank 0's ``metrics.json`` and its ``METRICS`` log line carry; a file that
#: disagrees with the log on any of them is stale (an earlier run in the same work_dir).
CONSISTENCY_KEYS = ("world_size", "global_step", "img_per_sec_total")


def read_metrics_file(uri: str) -> dict | None:
    """Rank 0's ``metrics.json`` at ``uri`` (gs:// or a PVC path), or None when it is
    missing or not a JSON object."""
    try:
        with storage.local_copy(uri) as p:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError) as e:
        log.info("no usable %s (%s); using the launcher log", uri, e)
        return None
    return data if isinstance(data, dict) else None


def choose_metrics(from_file: Mapping | None, from_log: Mapping | None) -> tuple[dict, str]:
    """Rank 0's metrics and where they came from (``"file"`` or ``"log"``).

    The file wins (it is the full record, with the per-rank ``ranks`` figures the log line
    leaves out) unless the log's ``METRICS`` line contradicts it on
    :data:`CONSISTENCY_KEYS`, which means the file is left over from an earlier run.

    Raises:
        RuntimeError: neither source has metrics.
    """
    if from_file is not None and from_log is not None:
        differ = [k for k in CONSISTENCY_KEYS if k in from_log and from_file.get(k) != from_log[k]]
        if differ:
            log.warning("metrics.json disagrees with the launcher log on %s: stale file, "
                        "using the log", differ)
            return dict(from_log), "log"
    if from_file is not None:
        return dict(from_file), "file"
    if from_log is not None:
        return dict(from_log), "log"
    raise RuntimeError("the MPIJob succeeded but rank 0 left no metrics: no readable "
                       "<work_dir>/metrics.json and no METRICS line in the launcher log")


def kfp_scalar_metrics(metrics: Mapping, single_img_per_sec: float = 0.0) -> dict[str, float]:
    """Scalars for the KFP Metrics artifact: throughput, loss/accuracy, world size,
    weights_identical (1/0), and ``scaling_efficiency`` = total / (size * single) when a
    one-GPU baseline img/sec is given."""
    keys = ("img_per_sec_per_gpu", "img_per_sec_total", "samples_per_sec", "ms_per_step",
            "world_size", "global_batch_size", "final_loss", "final_accuracy", "test_loss",
            "test_accuracy", "global_step", "epochs_run", "parameters", "weights_sum_spread")
    out = {k: float(metrics[k]) for k in keys if isinstance(metrics.get(k), (int, float))}
    out["weights_identical"] = 1.0 if metrics.get("weights_identical") else 0.0
    add_scaling_efficiency(out, single_img_per_sec)
    return out
