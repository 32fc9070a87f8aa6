"""Per-rank figures of the Horovod trainer combined into its metrics (pure numpy)."""

from __future__ import annotations

import hashlib

import numpy as np


def weights_checksum(weights: list[np.ndarray]) -> dict:
    """``{"sha256": hex of all weights' float32 bytes in order, "sum": float64 total}``."""
    h = hashlib.sha256()
    total = 0.0
    for w in weights:
        a = np.ascontiguousarray(np.asarray(w, dtype=np.float32))
        h.update(a.tobytes())
        total += float(np.sum(a, dtype=np.float64))
    return {"sha256": h.hexdigest(), "sum": total}


def summarize(per_rank: list[dict], batch_size: int) -> dict:
    """Combine gathered per-rank figures into the throughput metrics (pure).

    Args:
        per_rank: one dict per rank with ``img_per_sec``, ``checksum`` (see
            :func:`weights_checksum`).
        batch_size: images per step per rank.

    Returns:
        ``img_per_sec_per_gpu`` (mean over ranks), ``img_per_sec_per_gpu_ci95`` (1.96 std,
        as Horovod's synthetic benchmark prints), ``img_per_sec_total`` (sum; = samples/sec),
        ``ms_per_step`` (mean), ``weights_identical`` (all SHA-256 equal),
        ``weights_sum_spread`` (max - min of the weight sums).
    """
    ips = np.array([r["img_per_sec"] for r in per_rank], dtype=np.float64)
    sums = [r["checksum"]["sum"] for r in per_rank]
    mean = float(ips.mean()) if len(ips) else 0.0
    return {
        "world_size": len(per_rank),
        "img_per_sec_per_gpu": mean,
        "img_per_sec_per_gpu_ci95": float(1.96 * ips.std()) if len(ips) else 0.0,
        "img_per_sec_total": float(ips.sum()),
        "samples_per_sec": float(ips.sum()),
        "ms_per_step": 1000.0 * batch_size / mean if mean > 0 else 0.0,
        "weights_identical": len({r["checksum"]["sha256"] for r in per_rank}) == 1,
        "weights_sum_spread": float(max(sums) - min(sums)) if sums else 0.0,
    }
