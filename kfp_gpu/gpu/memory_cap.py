"""Runtime side of a GPU request: make the share hold inside the container.

A GPU request (:mod:`kfp_gpu.gpu`) tells the container its share through environment
variables (``KFP_GPU_KIND``, ``KFP_GPU_SHARE``, ``KFP_GPU_MEMORY_MIB``). Before any model is
built, :func:`apply_gpu_share` turns that into a TensorFlow memory cap: one logical device
per physical GPU with ``memory_limit`` in MiB (``tf.config.set_logical_device_configuration``),
so co-located jobs on a shared GPU do not overflow each other's memory. It logs what it did
and is a logged no-op on CPU.

The arithmetic lives in the pure :func:`memory_limit_mib` (tested on CPU for every kind).

Total device memory (MiB) comes from, in order: the ``KFP_GPU_TOTAL_MIB`` environment
variable (for tests and for GPUs whose tools are not in the image), NVML (``pynvml``, when
installed), ``nvidia-smi --query-gpu=memory.total``. Under HAMi the numbers these report are
already the virtualised memory.

This module does not import TensorFlow at import time.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess

from kfp_gpu.gpu.names import KIND_ENV, MEMORY_ENV, SHARE_ENV

log = logging.getLogger(__name__)

#: Override/declare the per-device total memory in MiB (skips NVML / nvidia-smi).
TOTAL_ENV = "KFP_GPU_TOTAL_MIB"
#: Reserve kept out of a fractional cap for the CUDA context and cuDNN/cuBLAS workspaces
#: that TensorFlow allocates outside its BFC allocator (MiB). 0 keeps the plain share.
RESERVE_ENV = "KFP_GPU_RESERVE_MIB"
#: Request kinds whose device other pods share: without a cap, memory growth is turned on.
SHARED_KINDS = ("shared", "fraction", "gpu-memory", "metagpu", "hami")


def memory_limit_mib(kind: str | None, share: float | None, memory_mib: int | None,
                     total_mib: int | None, reserve_mib: int = 0) -> tuple[int | None, str]:
    """Per-device TensorFlow memory limit for a request (pure).

    Args:
        kind: request kind (``KFP_GPU_KIND``) or None when no request was set.
        share: GPUs' worth on the visible device(s) (``KFP_GPU_SHARE``), None if unset.
        memory_mib: absolute cap in MiB (``KFP_GPU_MEMORY_MIB``), None/0 if unset.
        total_mib: memory of one visible device in MiB, None if unknown.
        reserve_mib: MiB subtracted from a share-derived cap (never below 1 MiB of cap).

    Returns:
        ``(limit_mib or None, reason)``: None means no cap (whole devices, MIG slices whose
        memory the hardware enforces, CPU only, or a share that cannot be turned into MiB).

    Raises:
        ValueError: share <= 0 or not finite, memory_mib < 0, total_mib <= 0.
    """
    if share is not None and not (math.isfinite(share) and share > 0):
        raise ValueError(f"{SHARE_ENV} must be a number > 0, got {share!r}")
    if memory_mib is not None and memory_mib < 0:
        raise ValueError(f"{MEMORY_ENV} must be an integer >= 1 MiB, got {memory_mib!r}")
    if total_mib is not None and total_mib <= 0:
        raise ValueError(f"total device memory must be > 0 MiB, got {total_mib!r}")
    if not kind or kind == "none":
        return None, "no GPU request in the environment (CPU only)"
    if memory_mib:
        if total_mib is not None and memory_mib >= total_mib:
            return None, f"{memory_mib} MiB requested >= {total_mib} MiB on the device: no cap"
        return memory_mib, f"{kind}: absolute cap of {memory_mib} MiB"
    if kind == "mig":
        return None, "mig: the slice's memory is enforced by the hardware; no cap needed"
    if share is None or share >= 1.0:
        what = ("whole device(s)" if kind != "shared"
                else "time-sliced replica without replicas= (share unknown)")
        return None, f"{kind}: {what}, no cap"
    if total_mib is None:
        return None, (f"{kind}: share {share:g} but total device memory unknown "
                      f"(set {TOTAL_ENV}); no cap applied")
    limit = max(1, math.floor(share * total_mib) - max(0, reserve_mib))
    extra = f" minus {reserve_mib} MiB reserve" if reserve_mib else ""
    return limit, f"{kind}: share {share:g} of {total_mib} MiB{extra}"


def _float_env(env, name) -> float | None:
    v = env.get(name, "").strip()
    if not v:
        return None
    try:
        return float(v)
    except ValueError as e:
        raise ValueError(f"{name} must be a number, got {v!r}") from e


def _int_env(env, name) -> int | None:
    v = env.get(name, "").strip()
    if not v:
        return None
    if not v.isdigit():
        raise ValueError(f"{name} must be a non-negative integer (MiB), got {v!r}")
    return int(v)


def total_memory_mib(env=None) -> list[int]:
    """Memory of each visible GPU in MiB ([] when none is found).

    Sources in order: ``KFP_GPU_TOTAL_MIB`` (one value for every device; the count then
    comes from nothing else, so a single entry), NVML via ``pynvml``, ``nvidia-smi``.
    """
    env = os.environ if env is None else env
    declared = _int_env(env, TOTAL_ENV)
    if declared:
        return [declared]
    try:  # NVML, if the bindings are installed (nvidia-ml-py)
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            return [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total
                    // (1024 * 1024) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # noqa: BLE001 - any NVML failure falls through to nvidia-smi
        log.debug("NVML not usable (%s); trying nvidia-smi", e)
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return [int(float(x)) for x in out.split() if x.strip()]
    except (subprocess.SubprocessError, OSError, ValueError):
        return []


def plan(env=None, total_mib: int | None = None) -> dict:
    """What :func:`apply_gpu_share` would do, from the environment (pure given ``total_mib``).

    Returns:
        dict with ``kind``, ``share``, ``memory_mib``, ``total_mib``, ``limit_mib`` (None =
        no cap) and ``reason``.
    """
    env = os.environ if env is None else env
    kind = env.get(KIND_ENV, "").strip() or None
    share = _float_env(env, SHARE_ENV)
    memory = _int_env(env, MEMORY_ENV)
    reserve = _int_env(env, RESERVE_ENV) or 0
    limit, reason = memory_limit_mib(kind, share, memory, total_mib, reserve)
    return {"kind": kind or "none", "share": share, "memory_mib": memory,
            "total_mib": total_mib, "limit_mib": limit, "reason": reason}


def apply_gpu_share(env=None, devices=None) -> dict:
    """Cap TensorFlow's GPU memory to the share this container was given. Call first thing,
    before any TensorFlow op or model is built.

    Args:
        env: environment mapping (default ``os.environ``).
        devices: the physical GPUs to cap (default: all TensorFlow sees); a Horovod rank
            passes only the GPU it is pinned to.

    Returns:
        dict for metrics: the :func:`plan` fields plus ``gpus`` (physical GPUs TensorFlow
        sees) and ``applied`` (True when logical-device limits were set).

    Raises:
        ValueError: malformed ``KFP_GPU_*`` variables.
        RuntimeError: the cap could not be set because TensorFlow already initialised the
            GPUs (call it earlier).
    """
    env = os.environ if env is None else env
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU") if devices is None else list(devices)
    totals = total_memory_mib(env) if gpus else []
    result = plan(env, totals[0] if totals else None)
    result.update(gpus=len(gpus), applied=False)
    if not gpus:
        result["reason"] = f"no GPU visible to TensorFlow (CPU run); nothing to cap " \
                           f"[request: {result['kind']}]"
        log.info("kfp_gpu.gpu.memory_cap: %s", result["reason"])
        return result
    limit = result["limit_mib"]
    if limit is None:
        if result["kind"] in SHARED_KINDS:
            # A device shared with other pods but no MiB to cap to (e.g. shared:1 without
            # replicas=): at least stop TensorFlow from reserving all of it up front.
            for dev in gpus:
                tf.config.experimental.set_memory_growth(dev, True)
            result["memory_growth"] = True
            log.warning("kfp_gpu.gpu.memory_cap: %s; the GPU is shared, so memory growth is on "
                        "(give replicas= or a MiB value for a hard cap)", result["reason"])
        else:
            log.info("kfp_gpu.gpu.memory_cap: %d GPU(s), no memory cap: %s", len(gpus),
                     result["reason"])
        return result
    try:
        for dev in gpus:
            tf.config.set_logical_device_configuration(
                dev, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])
    except RuntimeError as e:
        raise RuntimeError("kfp_gpu.gpu.memory_cap.apply_gpu_share must run before TensorFlow "
                           f"initialises the GPU: {e}") from e
    result["applied"] = True
    log.info("kfp_gpu.gpu.memory_cap: capped TensorFlow memory to %d MiB on %d GPU(s) (%s)",
             limit, len(gpus), result["reason"])
    return result
