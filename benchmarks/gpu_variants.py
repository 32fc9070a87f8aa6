"""The measurements benchmarks/gpu_bench.py runs, one per process (the Keras backend is
fixed per process: ``KERAS_BACKEND`` is set by the parent before Keras is imported).

Each function takes the variant's settings and returns a JSON-able dict; ``main`` prints it
as one ``RESULT {...}`` line for the parent. Sizes: ResNet-50 on synthetic ``[batch, 224,
224, 3]`` float32 images in 0..255 (resident on the GPU), 1000 classes; the IMDB LSTM on
the int32 ``[25000, 80]`` arrays ``gpu_bench.py prep`` writes. Times in seconds, rates in
img/s or samples/s, memory in MiB.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAXLEN, BATCH = 80, 32


# ------------------------------------------------------------------ timing and profiles
def backend() -> str:
    return os.environ.get("KERAS_BACKEND", "torch")


def sync() -> None:
    """Wait for queued GPU work (torch); JAX results read back as NumPy are already done."""
    if backend() == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()


def timed(step, batch: int, warmup: int, steps: int, windows: int = 3) -> dict:
    """img/s: median of ``windows`` timed windows of ``steps`` steps after ``warmup``."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    sync()
    first = time.perf_counter() - t0
    rates = []
    for _ in range(windows):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        rates.append(round(batch * steps / (time.perf_counter() - t), 1))
    return {"img_per_s": statistics.median(rates), "windows": rates, "batch": batch,
            "warmup_s_incl_compile": round(first, 1)}


def torch_profile(fn, steps: int, top: int = 15) -> dict:
    """torch.profiler over ``steps`` calls: wall and GPU-kernel ms per step, LSTM op names,
    the top ops by device time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    fn()
    sync()
    with profile(activities=acts) as prof:
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        sync()
        wall = time.perf_counter() - t
    avgs = prof.key_averages()
    dev = [e for e in avgs if str(e.device_type).endswith("CUDA")]
    kernel_us = sum(getattr(e, "self_device_time_total", 0) for e in dev)
    names = sorted({e.key for e in avgs})
    return {"wall_ms_per_step": round(1000 * wall / steps, 3),
            "gpu_kernel_ms_per_step": round(kernel_us / 1000 / steps, 3),
            "rnn_ops": [n for n in names if "rnn" in n.lower() or "lstm" in n.lower()][:20],
            "cudnn_rnn": any("cudnn_rnn" in n.lower() for n in names),
            "table": avgs.table(sort_by="self_device_time_total" if dev else "self_cpu_time_total",
                                row_limit=top, max_name_column_width=70)}


def jax_profile(fn, steps: int, top: int = 15) -> dict:
    """jax.profiler trace (Perfetto JSON) over ``steps`` calls: wall ms per step, the summed
    duration of the events on GPU streams per step and the top kernels by time."""
    import jax

    fn()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            wall = time.perf_counter() - t
        files = glob.glob(f"{tmp}/**/perfetto_trace.json.gz", recursive=True)
        keep = os.environ.get("GPU_BENCH_TRACE_DIR")
        if files and keep:  # the raw trace, for a closer look on the host
            shutil.copy(files[0], Path(keep, f"jax-{os.getpid()}-{int(time.time())}.json.gz"))
        events = []
        if files:
            with gzip.open(files[0]) as f:
                events = json.load(f).get("traceEvents", [])
    pnames = {e.get("pid"): str(e.get("args", {}).get("name", ""))
              for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    tnames = {(e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name", ""))
              for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    gpu_pids = {p for p, n in pnames.items() if "gpu" in n.lower() and "host" not in n.lower()}
    lines: Counter = Counter()  # per trace line of the GPU: streams and derived lines
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in gpu_pids:
            lines[tnames.get((e.get("pid"), e.get("tid")), "?")] += float(e.get("dur", 0))
    # Count kernels on the stream lines only: "XLA Modules"/"XLA Ops" repeat their time.
    streams = {t for t in lines if t.lower().startswith("stream")} or set(lines)
    by_name: Counter = Counter()
    for e in events:
        if (e.get("ph") == "X" and e.get("pid") in gpu_pids
                and tnames.get((e.get("pid"), e.get("tid")), "?") in streams):
            by_name[str(e.get("name"))[:70]] += float(e.get("dur", 0))
    total = sum(by_name.values())
    rows = [f"{'kernel (GPU streams)':70s} {'ms/step':>9s} {'share':>6s}"]
    rows += [f"{n:70s} {us / 1000 / steps:9.3f} {us / total:6.1%}"
             for n, us in by_name.most_common(top)] if total else ["(no GPU events in trace)"]
    return {"wall_ms_per_step": round(1000 * wall / steps, 3),
            "gpu_kernel_ms_per_step": round(total / 1000 / steps, 3),
            "gpu_processes": sorted(pnames[p] for p in gpu_pids),
            "gpu_lines_ms_per_step": {t: round(us / 1000 / steps, 3) for t, us in lines.items()},
            "rnn_ops": sorted({n for n in by_name if "rnn" in n.lower() or "lstm" in n.lower()})[:20],
            "cudnn_rnn": any("rnn" in n.lower() for n in by_name),
            "table": "\n".join(rows)}


def profile(fn, steps: int, top: int = 15) -> dict:
    """The backend's profile of ``steps`` calls; a profiler failure is reported, not raised
    (the timing before it still counts)."""
    try:
        return (jax_profile if backend() == "jax" else torch_profile)(fn, steps, top)
    except Exception as e:  # noqa: BLE001 - e.g. no CUPTI in the sandbox
        return {"error": f"{type(e).__name__}: {str(e)[:300]}", "table": "",
                "rnn_ops": [], "cudnn_rnn": None}


def on_device(array):
    """A NumPy array as a tensor resident on the backend's GPU (CPU when none)."""
    if backend() == "jax":
        import jax

        return jax.device_put(array)
    import torch

    return torch.as_tensor(array, device="cuda" if torch.cuda.is_available() else "cpu")


# ------------------------------------------------------------------ ResNet-50
def capability() -> tuple[int, int] | None:
    """The GPU's compute capability as the backend reports it; None without a GPU."""
    if backend() == "jax":
        import jax

        dev = jax.devices()[0]
        cc = getattr(dev, "compute_capability", None) if dev.platform == "gpu" else None
        return tuple(int(v) for v in str(cc).split(".")[:2]) if cc else None
    import torch

    return tuple(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None


def keras_resnet(policy: str, batch: int, jit, quick: bool) -> dict:
    """The project's Keras ResNet-50 (kfp_gpu.training.resnet_models) under this process's
    backend; synthetic on-GPU batches, ``train_on_batch`` steps. ``policy="auto"`` and
    ``jit=None`` take the trainer's GPU default (horovod_config.precision_plan)."""
    import keras
    import numpy as np

    from kfp_gpu.training import resnet_models
    from kfp_gpu.training.horovod_config import precision_plan

    if policy == "auto" or jit is None:
        plan = precision_plan(None if policy == "auto" else policy != "float32", jit,
                              capability())
        policy, jit = plan.policy, plan.xla
    keras.mixed_precision.set_global_policy(policy)
    model = resnet_models.build("resnet50", (224, 224, 3), 1000)
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                  loss="sparse_categorical_crossentropy", jit_compile=jit)
    rng = np.random.default_rng(0)
    x = on_device(rng.integers(0, 256, (batch, 224, 224, 3)).astype("float32"))
    y = on_device(rng.integers(0, 1000, (batch,)).astype("int32"))

    def step():
        return model.train_on_batch(x, y)

    r = timed(step, batch, 2 if quick else 8, 2 if quick else 12)
    r["profile"] = profile(step, 2 if quick else 3)
    r.update(policy=policy, jit_compile=jit)
    return r


def torch_resnet(amp: bool, batch: int, compile_: bool, quick: bool) -> dict:
    """Reference: torchvision ResNet-50, channels_last, bf16 autocast, optional torch.compile."""
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
    fwd = torch.compile(model) if compile_ else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp):
            loss = lossf(fwd(x), y)
        loss.backward()
        opt.step()

    r = timed(step, batch, 2 if quick else 10, 2 if quick else 15)
    if not compile_:
        r["profile"] = profile(step, 2 if quick else 3, top=10)
    return r


# ------------------------------------------------------------------ IMDB LSTM
def load_imdb(path: str, rows: int = 0):
    """``(x_train, y_train, x_test, y_test, vocabulary_size)``; ``rows`` > 0 keeps a head."""
    import numpy as np

    d = np.load(path)
    n = len(d["y_train"])
    cut = np.sort(np.random.default_rng(0).permutation(n)[:rows]) if rows else slice(None)
    return (d["x_train"][cut], d["y_train"][cut].astype("float32"), d["x_test"][cut],
            d["y_test"][cut].astype("float32"), int(d["vocabulary_size"]))


def imdb_model(cfg, vocab: int, maxlen: int, rows: int, **compile_kw):
    """``(model, steps per epoch)``: the trainer's model (text_model.build_model, with its
    Adam rate: text_model.adam_learning_rate over ``rows`` / BATCH steps per epoch) compiled
    again with the variant's ``compile_kw`` (``jit_compile``, ``steps_per_execution``)."""
    import keras

    from kfp_gpu.training.text_model import adam_learning_rate, build_model

    steps = -(-rows // BATCH)
    model = build_model(cfg, vocab, maxlen, steps)
    model.compile(optimizer=keras.optimizers.Adam(adam_learning_rate(cfg, steps)),
                  loss="binary_crossentropy", metrics=["accuracy"], **compile_kw)
    return model, steps


def keras_imdb(data: str, rows: int, epochs: int, jit, spe: int, extra: dict,
               quick: bool) -> dict:
    """kfp_gpu.training.text_model's LSTM classifier, compiled with ``jit`` (None: the
    trainer's choice for the backend, text_model.jit_compile_for) and ``spe``
    (steps_per_execution), trained with ``fit`` on the NumPy arrays; s/epoch, accuracy, and
    the LSTM kernel a profile of ``train_on_batch`` saw."""
    import keras

    from kfp_gpu.training.text_model import TrainConfig, jit_compile_for

    jit = jit_compile_for(keras.config.backend()) if jit is None else jit

    xtr, ytr, xte, yte, vocab = load_imdb(data, rows)
    cfg = TrainConfig(epochs=epochs, batch_size=BATCH, **extra)
    cfg.validate()
    keras.utils.set_random_seed(cfg.seed)
    model, steps = imdb_model(cfg, vocab, xtr.shape[1], len(xtr), jit_compile=jit,
                              steps_per_execution=spe)
    marks = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda e, logs: (sync(), marks.append(time.perf_counter())),
        on_epoch_end=lambda e, logs: (sync(), marks.append(time.perf_counter())))
    model.fit(xtr, ytr, batch_size=BATCH, epochs=epochs, shuffle=True, verbose=0,
              callbacks=[timer])
    secs = [round(marks[i + 1] - marks[i], 3) for i in range(0, len(marks), 2)]
    loss, acc = model.evaluate(xte, yte, batch_size=1024, verbose=0)
    xb, yb = on_device(xtr[:BATCH]), on_device(ytr[:BATCH])
    prof = profile(lambda: model.train_on_batch(xb, yb), 5 if quick else 20)
    return {"config": {**vars(cfg), "jit_compile": jit, "steps_per_execution": spe},
            "epoch_seconds": secs, "steady_s_per_epoch": secs[-1], "steps_per_epoch": steps,
            "fit_ms_per_step": round(1000 * secs[-1] / steps, 3), "test_accuracy": float(acc),
            "test_loss": float(loss), "train_rows": len(xtr), "test_rows": len(xte),
            "lstm_ops_seen": prof["rnn_ops"], "cudnn_kernel_used": prof["cudnn_rnn"],
            "profile": prof}


def torch_lstm(data: str, rows: int, epochs: int, quick: bool) -> dict:
    """Reference floor: the same network in plain PyTorch (nn.LSTM = cuDNN), batch 32, the
    data resident on the GPU, so no Keras trainer and no input pipeline per step."""
    import torch

    xtr, ytr, xte, yte, vocab = load_imdb(data, rows)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(42)
    emb = torch.nn.Embedding(vocab, 128).to(dev)
    lstm = torch.nn.LSTM(128, 128, batch_first=True).to(dev)
    head = torch.nn.Linear(128, 1).to(dev)
    params = [*emb.parameters(), *lstm.parameters(), *head.parameters()]
    opt, lossf = torch.optim.Adam(params, 1e-3), torch.nn.BCEWithLogitsLoss()

    def logits(x):
        return head(lstm(emb(x))[0][:, -1]).squeeze(1)

    xt, yt = torch.as_tensor(xtr, device=dev).long(), torch.as_tensor(ytr, device=dev)
    secs = []
    for _ in range(epochs):
        sync()
        t, perm = time.perf_counter(), torch.randperm(len(xt), device=dev)
        for b in range(0, len(xt), BATCH):
            i = perm[b:b + BATCH]
            opt.zero_grad(set_to_none=True)
            lossf(logits(xt[i]), yt[i]).backward()
            opt.step()
        sync()
        secs.append(round(time.perf_counter() - t, 3))
    with torch.no_grad():
        xe = torch.as_tensor(xte, device=dev).long()
        pred = torch.cat([logits(xe[b:b + 1024]) for b in range(0, len(xe), 1024)]) > 0
        acc = (pred.float().cpu().numpy() == yte).mean()
    return {"epoch_seconds": secs, "steady_s_per_epoch": secs[-1], "test_accuracy": float(acc)}


# ------------------------------------------------------------------ GPU share
def smi_used_mib(pid: int) -> int | None:
    """Device memory nvidia-smi charges to ``pid`` (CUDA context + allocator), MiB."""
    try:
        rows = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                               "--format=csv,noheader,nounits"], capture_output=True,
                              text=True, timeout=30, check=False).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    for row in rows:
        p, _, used = row.partition(",")
        if p.strip() == str(pid) and used.strip().isdigit():
            return int(used)
    return None


def share_cap(k: int, reserve_mib: int) -> dict:
    """The project's share -> MiB plan (kfp_gpu.gpu.memory_cap.plan) for ``fraction:1/k``,
    mapped to the backend's own cap: ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (set before JAX
    starts) or ``torch.cuda.set_per_process_memory_fraction``."""
    from kfp_gpu import gpu
    from kfp_gpu.gpu import memory_cap

    env = {**gpu.parse(f"fraction:{1 / k!r}" if k > 1 else "gpu:1").env(),
           memory_cap.RESERVE_ENV: str(reserve_mib)}
    totals = memory_cap.total_memory_mib()
    plan = memory_cap.plan(env, totals[0] if totals else None)
    frac = (plan["limit_mib"] / totals[0]) if (plan["limit_mib"] and totals) else None
    if backend() == "jax":
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{frac or 0.75:.4f}"
    elif frac:
        import torch

        torch.cuda.set_per_process_memory_fraction(min(1.0, frac), 0)
    return {"plan": plan, "fraction": frac, "share_mib": (totals[0] // k) if totals else None}


def share_worker(data: str, rows: int, k: int, index: int, barrier: str, reserve_mib: int,
                 jit: bool, spe: int) -> dict:
    """One of K processes: cap at 1/K, warm up, wait at the barrier, one timed epoch."""
    rec = {"index": index, "k": k, "pid": os.getpid(), "oom": False,
           **share_cap(k, reserve_mib)}
    try:
        import keras

        from kfp_gpu.training.text_model import TrainConfig

        xtr, ytr, _, _, vocab = load_imdb(data, rows)
        keras.utils.set_random_seed(index)
        model, _ = imdb_model(TrainConfig(seed=index), vocab, MAXLEN, len(xtr), jit_compile=jit,
                              steps_per_execution=spe)
        model.fit(xtr[:BATCH * 4 * spe], ytr[:BATCH * 4 * spe], batch_size=BATCH, epochs=1,
                  verbose=0)
        sync()
        Path(barrier, f"ready-{index}").touch()
        deadline = time.time() + 600
        while len(list(Path(barrier).glob("ready-*"))) < k and time.time() < deadline:
            time.sleep(0.01)
        rec["start"] = time.time()
        model.fit(xtr, ytr, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        sync()
        rec["end"] = time.time()
        rec.update(samples=len(xtr), smi_used_mib=smi_used_mib(os.getpid()))
    except Exception as e:  # noqa: BLE001 - report an OOM (any backend's type) as a result
        rec.update(oom="out of memory" in str(e).lower() or "resource_exhausted" in str(e).lower(),
                   error=f"{type(e).__name__}: {str(e)[:300]}")
    return rec


def imdb_accuracy(data: str, epochs: int, seed: int, use_cudnn, jit: bool,
                  config: dict | None = None) -> dict:
    """Test accuracy after each epoch for one seed and LSTM kernel choice (``use_cudnn``
    False: the layer's generic loop), to tell a backend's accuracy from run-to-run spread.
    ``config``: TrainConfig overrides (e.g. ``{"dropout": 0.2}``, ``{"lr_schedule":
    "constant"}``); the learning rate is the trainer's (text_model.adam_learning_rate)."""
    import keras

    from kfp_gpu.training.text_model import TrainConfig

    xtr, ytr, xte, yte, vocab = load_imdb(data)
    cfg = TrainConfig(epochs=epochs, seed=seed, **(config or {}))
    cfg.validate()
    keras.utils.set_random_seed(seed)
    model, _ = imdb_model(cfg, vocab, MAXLEN, len(xtr), jit_compile=jit)
    model.get_layer("lstm").use_cudnn = use_cudnn  # read when the step is first traced
    accs, secs = [], []
    for _ in range(epochs):
        t = time.perf_counter()
        model.fit(xtr, ytr, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        secs.append(round(time.perf_counter() - t, 3))
        accs.append(round(float(model.evaluate(xte, yte, batch_size=1024, verbose=0)[1]), 4))
    return {"backend": backend(), "seed": seed, "use_cudnn": use_cudnn, "jit": jit,
            "config": config or {}, "test_accuracy_per_epoch": accs, "epoch_seconds": secs}


FUNCTIONS = {"keras_resnet": keras_resnet, "torch_resnet": torch_resnet,
             "keras_imdb": keras_imdb, "torch_lstm": torch_lstm, "share_worker": share_worker,
             "imdb_accuracy": imdb_accuracy}


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    spec = json.loads(argv[0])
    res = FUNCTIONS[spec.pop("fn")](**spec)
    print("RESULT " + json.dumps(res, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
