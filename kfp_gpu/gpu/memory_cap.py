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
#: Headroom (MiB per process) kept out of every cap, fractional or absolute, for what
#: lives outside TensorFlow's BFC pool: the CUDA context and the module images of
#: cuDNN/cuBLAS (hundreds of MiB right after init, pytorch/pytorch#34323 shows 781 MB with
#: eager loading; CUDA >= 12.2 lazy loading reduces it, TF 2.18 still loads many kernels),
#: the cuBLAS/cuBLASLt workspace (32 MiB on Hopper, 4 MiB otherwise: cuBLAS docs
#: ``cublasSetWorkspace``) and NCCL buffers (``NCCL_BUFFSIZE`` 4 MiB per channel per peer
#: per protocol: NCCL docs, environment variables). Without it a process capped at exactly
#: its share goes over it, and MetaGPU's enforcer kills it (cnvrg/metagpu
#: pkg/gpumgr/enforcer.go counts NVML per-process memory, context included).
DEFAULT_RESERVE_MIB = 768
#: Override the headroom (MiB, ``0`` for none).
RESERVE_ENV = "KFP_GPU_RESERVE_MIB"
#: Request kinds whose device other pods share: without a cap, memory growth is turned on
#: (``dra-shared``: a ``dra`` claim with time-slicing or MPS, :mod:`kfp_gpu.gpu.kinds.dra`;
#: a ``dra`` MIG claim caps at its profile's memory through ``KFP_GPU_MEMORY_MIB``).
SHARED_KINDS = ("shared", "fraction", "gpu-memory", "metagpu", "hami", "dra-shared")
#: Limits the sharing systems inject into the container (read before this suite's own):
#: HAMi device plugin pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go Allocate
#: (``CUDA_DEVICE_MEMORY_LIMIT_<i>``, e.g. ``8000m``; HAMi-core
#: src/multiprocess/multiprocess_memory_limit.c falls back to ``CUDA_DEVICE_MEMORY_LIMIT``);
#: cnvrg/metagpu pkg/plugin/server.go Allocate (``METAGPU_MAX_MEM``, MiB); KAI
#: pkg/binder/common/constants.go ``GPU_PORTION`` (share of the device, ``%.2f``).
HAMI_LIMIT_ENV = "CUDA_DEVICE_MEMORY_LIMIT"
METAGPU_LIMIT_ENV = "METAGPU_MAX_MEM"
KAI_PORTION_ENV = "GPU_PORTION"
_SUFFIX_BYTES = {"g": 1024 ** 3, "m": 1024 ** 2, "k": 1024}


def parse_hami_limit(text: str) -> int:
    """MiB of a HAMi ``CUDA_DEVICE_MEMORY_LIMIT`` value: ``8000m``, ``8g``, ``512k`` or
    bytes without a suffix (HAMi-core ``get_limit_from_env``); raises ValueError."""
    t = text.strip().lower()
    mult = _SUFFIX_BYTES.get(t[-1:], 1)
    digits = t[:-1] if mult != 1 else t
    if not digits.isdigit():
        raise ValueError(f"{HAMI_LIMIT_ENV} must be an integer with an optional k/m/g "
                         f"suffix, got {text!r}")
    return int(digits) * mult // (1024 * 1024)


def injected_limit_mib(env, device_index: int = 0,
                       total_mib: int | None = None) -> tuple[int | None, str]:
    """The device memory the sharing system itself gave this container, in MiB (pure).

    Precedence: HAMi ``CUDA_DEVICE_MEMORY_LIMIT_<device_index>`` then
    ``CUDA_DEVICE_MEMORY_LIMIT``; MetaGPU ``METAGPU_MAX_MEM``; KAI ``GPU_PORTION`` x
    ``total_mib`` (floor). Sources: see :data:`HAMI_LIMIT_ENV`.

    Returns:
        ``(MiB or None, name of the variable read)``; ``(None, "")`` when none is set (or
        ``GPU_PORTION`` is set but the device memory is unknown).

    Raises:
        ValueError: a malformed value.
    """
    for name in (f"{HAMI_LIMIT_ENV}_{device_index}", HAMI_LIMIT_ENV):
        if env.get(name, "").strip():
            return parse_hami_limit(env[name]), name
    metagpu = _int_env(env, METAGPU_LIMIT_ENV)
    if metagpu:
        return metagpu, METAGPU_LIMIT_ENV
    portion = _float_env(env, KAI_PORTION_ENV)
    if portion is not None and total_mib:
        if not (math.isfinite(portion) and portion > 0):
            raise ValueError(f"{KAI_PORTION_ENV} must be a number > 0, got {portion!r}")
        return math.floor(min(portion, 1.0) * total_mib), KAI_PORTION_ENV
    return None, ""


def _reserved(limit: int, reserve_mib: int, what: str) -> int:
    """``limit - reserve``; ValueError when that leaves less than the reserve itself."""
    reserve = max(0, reserve_mib)
    cap = limit - reserve
    if cap < max(reserve, 1):
        raise ValueError(f"{what}: {limit} MiB leaves {cap} MiB after the {reserve} MiB "
                         f"reserve ({RESERVE_ENV}, default {DEFAULT_RESERVE_MIB}) for the CUDA "
                         "context and libraries; ask for more GPU memory, or lower "
                         f"{RESERVE_ENV} if you measured less")
    return cap


def memory_limit_mib(kind: str | None, share: float | None, memory_mib: int | None,
                     total_mib: int | None,
                     reserve_mib: int = DEFAULT_RESERVE_MIB) -> tuple[int | None, str]:
    """Per-device TensorFlow memory limit for a request (pure).

    Args:
        kind: request kind (``KFP_GPU_KIND``) or None when no request was set.
        share: GPUs' worth on the visible device(s) (``KFP_GPU_SHARE``), None if unset.
        memory_mib: absolute cap in MiB (``KFP_GPU_MEMORY_MIB``), None/0 if unset.
        total_mib: memory of one visible device in MiB, None if unknown.
        reserve_mib: MiB kept out of every cap (share-derived and absolute), see
            :data:`DEFAULT_RESERVE_MIB`.

    Returns:
        ``(limit_mib or None, reason)``: None means no cap (whole devices, MIG slices whose
        memory the hardware enforces, CPU only, or a share that cannot be turned into MiB).

    Raises:
        ValueError: share <= 0 or not finite, memory_mib < 0, total_mib <= 0, or a cap that
            would leave less than the reserve (tiny shares).
    """
    if share is not None and not (math.isfinite(share) and share > 0):
        raise ValueError(f"{SHARE_ENV} must be a number > 0, got {share!r}")
    if memory_mib is not None and memory_mib < 0:
        raise ValueError(f"{MEMORY_ENV} must be an integer >= 1 MiB, got {memory_mib!r}")
    if total_mib is not None and total_mib <= 0:
        raise ValueError(f"total device memory must be > 0 MiB, got {total_mib!r}")
    if not kind or kind == "none":
        return None, "no GPU request in the environment (CPU only)"
    extra = f" minus {reserve_mib} MiB reserve" if reserve_mib > 0 else ""
    if memory_mib:
        if total_mib is not None and memory_mib >= total_mib:
            return None, f"{memory_mib} MiB requested >= {total_mib} MiB on the device: no cap"
        return (_reserved(memory_mib, reserve_mib, f"{kind} cap"),
                f"{kind}: absolute cap of {memory_mib} MiB{extra}")
    if kind == "mig":
        return None, "mig: the slice's memory is enforced by the hardware; no cap needed"
    if share is None or share >= 1.0:
        what = ("whole device(s)" if kind != "shared"
                else "time-sliced replica without replicas= (share unknown)")
        return None, f"{kind}: {what}, no cap"
    if total_mib is None:
        return None, (f"{kind}: share {share:g} but total device memory unknown "
                      f"(set {TOTAL_ENV}); no cap applied")
    limit = _reserved(math.floor(share * total_mib), reserve_mib,
                      f"{kind}: share {share:g} of {total_mib} MiB")
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


def plan(env=None, total_mib: int | None = None, device_index: int = 0) -> dict:
    """What :func:`apply_gpu_share` would do, from the environment (pure given ``total_mib``).

    A limit the sharing system injected (:func:`injected_limit_mib`: HAMi, MetaGPU, KAI)
    wins over this suite's ``KFP_GPU_SHARE`` / ``KFP_GPU_MEMORY_MIB``; the reserve
    (``KFP_GPU_RESERVE_MIB``, default :data:`DEFAULT_RESERVE_MIB`) is kept out of either.

    Returns:
        dict with ``kind``, ``share``, ``memory_mib``, ``total_mib``, ``limit_mib`` (None =
        no cap), ``source`` (the variable the limit came from) and ``reason``.
    """
    env = os.environ if env is None else env
    kind = env.get(KIND_ENV, "").strip() or None
    share = _float_env(env, SHARE_ENV)
    memory = _int_env(env, MEMORY_ENV)
    reserve = _int_env(env, RESERVE_ENV)
    reserve = DEFAULT_RESERVE_MIB if reserve is None else reserve
    injected, source = injected_limit_mib(env, device_index, total_mib)
    if injected is not None:
        limit = _reserved(injected, reserve, f"{source}={env[source]}")
        reason = (f"{kind or 'GPU'}: {injected} MiB injected by the sharing system "
                  f"({source}) minus {reserve} MiB reserve")
    else:
        limit, reason = memory_limit_mib(kind, share, memory, total_mib, reserve)
        source = MEMORY_ENV if memory and limit is not None else SHARE_ENV if limit else ""
    return {"kind": kind or "none", "share": share, "memory_mib": memory,
            "total_mib": total_mib, "limit_mib": limit, "source": source, "reason": reason}


def _index(device) -> int:
    """Index of a TensorFlow physical GPU (``/physical_device:GPU:1`` -> 1; 0 if unnamed):
    HAMi numbers ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` by the container's visible devices."""
    tail = str(getattr(device, "name", "")).rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


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
    plans = [plan(env, totals[min(_index(d), len(totals) - 1)] if totals else None, _index(d))
             for d in gpus]
    result = plans[0] if plans else plan(env, None)
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
        for dev, p in zip(gpus, plans):
            tf.config.set_logical_device_configuration(
                dev, [tf.config.LogicalDeviceConfiguration(
                    memory_limit=p["limit_mib"] or limit)])
    except RuntimeError as e:
        raise RuntimeError("kfp_gpu.gpu.memory_cap.apply_gpu_share must run before TensorFlow "
                           f"initialises the GPU: {e}") from e
    result["applied"] = True
    log.info("kfp_gpu.gpu.memory_cap: capped TensorFlow memory to %d MiB on %d GPU(s) (%s)",
             limit, len(gpus), result["reason"])
    return result
