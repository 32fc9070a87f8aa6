"""On a real GPU: cuDNN LSTM vs generic kernel, K processes sharing one GPU, ResNet-50.

The lent GPU machine has PyTorch but no TensorFlow, so the Keras models of this suite run
there with ``KERAS_BACKEND=torch`` (keras 3.15.1 and its missing needs, namex and optree,
travel as wheels). Figures and commands: docs/benchmarks.md, section GPU; raw outputs in
benchmarks/results/gpu/. Not a test (pytest collects tests/ only); CI never runs it.

Commands::

    # host, project venv (TensorFlow): tokenise IMDB exactly as components/prep_text does
    .venv/bin/python benchmarks/gpu_bench.py prep --csv ../shared/data/imdb/imdb_50k.csv.gz
    # GPU machine: any of the three measurements, JSON + profiles into --out
    python3 benchmarks/gpu_bench.py run imdb share resnet --out "$OUT" [--quick] [-v]

1. ``imdb``: kfp_gpu.training.text_model.build_model (Embedding -> LSTM(128) -> Dense),
   batch 32, maxlen 80, 25k/25k, 2 epochs, for the cuDNN-eligible configuration and the
   seed article's (dropout 0.2 + recurrent_dropout 0.2, generic kernel); s/epoch, test
   accuracy, and the LSTM ops torch.profiler saw (``aten::_cudnn_rnn`` = cuDNN).
2. ``share``: K processes at once, each capped at 1/K by kfp_gpu.gpu.memory_cap.plan (the project's
   share -> MiB arithmetic, ``KFP_GPU_RESERVE_MIB`` headroom) mapped to
   ``torch.cuda.set_per_process_memory_fraction``, each training one IMDB epoch behind a
   start barrier; OOMs, peak memory per process (allocator + CUDA context from nvidia-smi)
   against the share, aggregate samples/s against one uncapped process.
3. ``resnet``: kfp_gpu.training.resnet_models.build("resnet50") under the torch backend, float32 and
   mixed_bfloat16, against torchvision ResNet-50 (channels_last, bf16 autocast, optionally
   torch.compile); synthetic 224x224 batches resident on the GPU; img/s per GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".gpudata" / "imdb_maxlen80.npz"
MAXLEN, NUM_WORDS, BATCH = 80, 20000, 32
#: LSTM settings: cuDNN-eligible (the suite's default) and the seed article's.
IMDB_VARIANTS = {"cudnn": {},
                 "article": {"dropout": 0.2, "recurrent_dropout": 0.2,
                             "allow_generic_kernel": True}}
VERBOSE = False


def say(name: str, value, unit: str = "", **extra) -> None:
    """One line per figure (the default output); extras only with -v."""
    tail = ("  " + json.dumps(extra)) if (VERBOSE and extra) else ""
    print(f"{name}: {value} {unit}{tail}".rstrip(), flush=True)


def save(out: Path, name: str, obj) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{name}.tmp"
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    tmp.replace(out / name)


def prep(csv: str, dest: Path) -> None:
    """Host side: the prep_text component's own run (read, split, tokenise, pad), saved as
    int32 ``[N, 80]`` arrays (last 80 tokens, zeros in front, vocabulary 20000 fitted on
    train), so the GPU machine needs neither TensorFlow nor the CSV."""
    import numpy as np

    from kfp_gpu.components.prep_text import prep as p
    from kfp_gpu.training import datasets

    with tempfile.TemporaryDirectory() as tmp:
        stats = p.run(source=csv, train_path=f"{tmp}/train", test_path=f"{tmp}/test",
                      vocabulary_path=f"{tmp}/vocab", num_words=NUM_WORDS, maxlen=MAXLEN)
        xtr, ytr = datasets.load_arrays(f"{tmp}/train")
        xte, yte = datasets.load_arrays(f"{tmp}/test")
    dest.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(dest, x_train=xtr, y_train=ytr, x_test=xte, y_test=yte,
                        vocabulary_size=stats["vocabulary_size"])
    print(f"wrote {dest}: train {xtr.shape}, test {xte.shape}, "
          f"vocabulary {stats['vocabulary_size']}, {dest.stat().st_size / 2**20:.1f} MiB")


def load_imdb(path: Path, rows: int = 0):
    """``(x_train, y_train, x_test, y_test, vocabulary_size)``; ``rows`` > 0 keeps a head."""
    import numpy as np

    d = np.load(path)
    n = len(d["y_train"])
    cut = np.sort(np.random.default_rng(0).permutation(n)[:rows]) if rows else slice(None)
    return (d["x_train"][cut], d["y_train"][cut].astype("float32"), d["x_test"][cut],
            d["y_test"][cut].astype("float32"), int(d["vocabulary_size"]))


def environment() -> dict:
    """Versions and the GPU as nvidia-smi and torch see it."""
    import keras
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "keras": keras.__version__, "keras_backend": keras.config.backend(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    try:
        q = "name,driver_version,memory.total,clocks.max.sm,power.limit"
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False).stdout.strip()
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30,
                              check=False)
        info["cuda_driver"] = next((ln.split("CUDA Version:")[1].strip(" |")
                                    for ln in head.stdout.splitlines() if "CUDA Version" in ln),
                                   None)
    except (OSError, subprocess.SubprocessError) as e:
        info["nvidia_smi"] = f"unavailable: {e}"
    return info


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile(fn, steps: int, top: int = 12) -> dict:
    """torch.profiler over ``steps`` calls: wall and GPU-kernel ms per step, the op names
    (to see which LSTM implementation ran) and the top ops by device time."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    fn()
    sync()
    with tprofile(activities=acts) as prof:
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
            "cudnn_rnn": any("_cudnn_rnn" in n for n in names),
            "table": avgs.table(sort_by="self_device_time_total" if dev else "self_cpu_time_total",
                                row_limit=top, max_name_column_width=70)}


def imdb_variant(name: str, data, epochs: int) -> dict:
    """Train one LSTM configuration as the text classifier builds it; time each epoch."""
    import keras
    import torch

    from kfp_gpu.training.text_model import TrainConfig, build_model

    xtr, ytr, xte, yte, vocab = data
    cfg = TrainConfig(epochs=epochs, batch_size=BATCH, **IMDB_VARIANTS[name])
    cfg.validate()
    keras.utils.set_random_seed(cfg.seed)
    model = build_model(cfg, vocab, xtr.shape[1])
    marks = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda e, logs: (sync(), marks.append(time.perf_counter())),
        on_epoch_end=lambda e, logs: (sync(), marks.append(time.perf_counter())))
    model.fit(xtr, ytr, batch_size=BATCH, epochs=epochs, shuffle=True,
              verbose=2 if VERBOSE else 0, callbacks=[timer])
    secs = [round(marks[i + 1] - marks[i], 3) for i in range(0, len(marks), 2)]
    loss, acc = model.evaluate(xte, yte, batch_size=1024, verbose=0)
    steps = -(-len(xtr) // BATCH)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    xb, yb = torch.as_tensor(xtr[:BATCH], device=dev), torch.as_tensor(ytr[:BATCH], device=dev)
    prof = profile(lambda: model.train_on_batch(xb, yb), 20 if name == "cudnn" else 5)
    return {"variant": name, "config": {k: v for k, v in vars(cfg).items()},
            "epoch_seconds": secs, "steady_s_per_epoch": secs[-1], "steps_per_epoch": steps,
            "fit_ms_per_step": round(1000 * secs[-1] / steps, 3), "test_accuracy": float(acc),
            "test_loss": float(loss), "train_rows": len(xtr), "test_rows": len(xte),
            "lstm_ops_seen": prof["rnn_ops"], "cudnn_kernel_used": prof["cudnn_rnn"],
            "device_batch_profile": {k: v for k, v in prof.items() if k != "table"},
            "profile_table": prof["table"]}


def torch_lstm(data, epochs: int) -> dict:
    """Reference floor: the same network in plain PyTorch (nn.LSTM = cuDNN), batch 32, the
    data resident on the GPU, so no Keras trainer and no input pipeline per step."""
    import torch

    xtr, ytr, xte, yte, vocab = data
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(42)
    emb, lstm = torch.nn.Embedding(vocab, 128).to(dev), torch.nn.LSTM(128, 128, batch_first=True)
    head = torch.nn.Linear(128, 1).to(dev)
    lstm = lstm.to(dev)
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
    return {"variant": "plain PyTorch nn.LSTM (cuDNN), data on GPU", "epoch_seconds": secs,
            "steady_s_per_epoch": secs[-1], "test_accuracy": float(acc)}


def run_imdb(args, out: Path) -> dict:
    data = load_imdb(args.data, args.rows)
    epochs = 1 if args.quick else 2
    res = {}
    for name in IMDB_VARIANTS:
        res[name] = imdb_variant(name, data, epochs)
        save(out, "imdb.json", res)
    res["torch_reference"] = torch_lstm(data, epochs)
    c, a = res["cudnn"], res["article"]
    res["speedup"] = round(a["steady_s_per_epoch"] / c["steady_s_per_epoch"], 2)
    for name, r in res.items():
        if isinstance(r, dict):
            say(f"imdb {name} s/epoch", r["steady_s_per_epoch"], "s", epochs=r["epoch_seconds"],
                ops=r.get("lstm_ops_seen"), profile=r.get("device_batch_profile"))
            say(f"imdb {name} test accuracy", round(r["test_accuracy"], 4))
            if "cudnn_kernel_used" in r:
                say(f"imdb {name} cuDNN kernel used", r["cudnn_kernel_used"])
    say("imdb cuDNN speed-up over generic kernel", res["speedup"], "x")
    save(out, "imdb.json", res)
    return res


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


def share_worker(args) -> None:
    """One of K processes: cap at 1/K, warm up, barrier, one timed epoch, a JSON line."""
    import torch

    from kfp_gpu import gpu
    from kfp_gpu.gpu import memory_cap as device

    k = args.k
    env = {**gpu.parse(f"fraction:{1 / k!r}" if k > 1 else "gpu:1").env(),
           device.RESERVE_ENV: str(args.reserve_mib)}
    totals = device.total_memory_mib()
    plan = device.plan(env, totals[0] if totals else None)
    if plan["limit_mib"] and torch.cuda.is_available():  # torch counts its own total
        total = torch.cuda.get_device_properties(0).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, plan["limit_mib"] / total), 0)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // k))
    rec = {"index": args.index, "k": k, "pid": os.getpid(), "plan": plan,
           "share_mib": (totals[0] // k) if totals else None, "oom": False}
    try:
        import keras

        from kfp_gpu.training.text_model import TrainConfig, build_model

        xtr, ytr, _, _, vocab = load_imdb(args.data, args.rows)
        keras.utils.set_random_seed(args.index)
        model = build_model(TrainConfig(seed=args.index), vocab, MAXLEN)
        model.fit(xtr[:BATCH * 20], ytr[:BATCH * 20], batch_size=BATCH, epochs=1, verbose=0)
        sync()
        Path(args.barrier, f"ready-{args.index}").touch()
        deadline = time.time() + 600
        while len(list(Path(args.barrier).glob("ready-*"))) < k and time.time() < deadline:
            time.sleep(0.01)
        rec["start"] = time.time()
        model.fit(xtr, ytr, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        sync()
        rec["end"] = time.time()
        rec.update(samples=len(xtr), peak_reserved_mib=torch.cuda.max_memory_reserved() / 2**20,
                   peak_allocated_mib=torch.cuda.max_memory_allocated() / 2**20,
                   smi_used_mib=smi_used_mib(os.getpid()))
    except torch.OutOfMemoryError as e:
        rec.update(oom=True, error=str(e)[:300])
    print("RESULT " + json.dumps(rec), flush=True)


def share_group(args, k: int) -> dict:
    """Start K workers at once and gather their result lines."""
    with tempfile.TemporaryDirectory() as barrier:
        cmd = [sys.executable, __file__, "share-worker", "--k", str(k), "--barrier", barrier,
               "--data", str(args.data), "--rows", str(args.rows),
               "--reserve-mib", str(args.reserve_mib)]
        procs = [subprocess.Popen(cmd + ["--index", str(i)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(k)]
        outs = [p.communicate(timeout=900) for p in procs]
    recs = []
    for p, (so, se) in zip(procs, outs):
        line = next((ln for ln in so.splitlines() if ln.startswith("RESULT ")), None)
        rec = json.loads(line[7:]) if line else {"error": se[-600:]}
        rec["returncode"] = p.returncode
        rec["oom"] = rec.get("oom") or "out of memory" in se.lower()
        recs.append(rec)
    ok = [r for r in recs if "end" in r]
    res = {"k": k, "processes": recs, "ok": len(ok), "oom": sum(bool(r["oom"]) for r in recs)}
    if ok:
        span = max(r["end"] for r in ok) - min(r["start"] for r in ok)
        res["aggregate_samples_per_s"] = round(sum(r["samples"] for r in ok) / span, 1)
        res["per_process_samples_per_s"] = [round(r["samples"] / (r["end"] - r["start"]), 1)
                                            for r in ok]
        used = [r["smi_used_mib"] or 0 for r in ok]
        res["max_smi_used_mib"], res["max_peak_reserved_mib"] = max(used), round(
            max(r["peak_reserved_mib"] for r in ok), 1)
        res["share_mib"] = ok[0]["share_mib"]
        res["within_share"] = all(u <= (r["share_mib"] or 1e12) for u, r in zip(used, ok))
    return res


def run_share(args, out: Path) -> dict:
    res = {"groups": []}
    for k in [1] + list(args.k):
        g = share_group(args, k)
        res["groups"].append(g)
        base = res["groups"][0].get("aggregate_samples_per_s")
        agg = g.get("aggregate_samples_per_s")
        g["vs_one_process"] = round(agg / base, 2) if agg and base else None
        say(f"share K={k} ok/oom", f"{g['ok']}/{g['oom']}")
        say(f"share K={k} aggregate samples/s", agg, f"({g['vs_one_process']}x one process)",
            per_process=g.get("per_process_samples_per_s"))
        say(f"share K={k} peak MiB per process (nvidia-smi; torch reserved)",
            f"{g.get('max_smi_used_mib')}; {g.get('max_peak_reserved_mib')}",
            f"of {g.get('share_mib')} MiB share, within={g.get('within_share')}")
        save(out, "share.json", res)
    return res


def timed(step, batch: int, warmup: int, steps: int, windows: int = 3) -> dict:
    """img/s: median of ``windows`` timed windows of ``steps`` steps after ``warmup``."""
    for _ in range(warmup):
        step()
    sync()
    rates = []
    for _ in range(windows):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        rates.append(round(batch * steps / (time.perf_counter() - t), 1))
    return {"img_per_s": statistics.median(rates), "windows": rates, "batch": batch}


def keras_resnet(policy: str, batch: int, quick: bool, fmt: str = "channels_last") -> dict:
    """The project's Keras ResNet-50 under the torch backend, synthetic on-GPU batches."""
    import keras
    import torch

    from kfp_gpu.training import resnet_models

    keras.mixed_precision.set_global_policy(policy)
    keras.config.set_image_data_format(fmt)
    try:
        shape = (224, 224, 3) if fmt == "channels_last" else (3, 224, 224)
        model = (resnet_models.build("resnet50", shape, 1000) if fmt == "channels_last" else
                 keras.applications.ResNet50(weights=None, input_shape=shape))  # diagnosis
        model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                      loss="sparse_categorical_crossentropy")
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.randint(0, 256, (batch, *shape), device=dev).float()
        y = torch.randint(0, 1000, (batch,), device=dev)
        step = lambda: model.train_on_batch(x, y)
        r = timed(step, batch, 2 if quick else 10, 2 if quick else 15)
        r["profile"] = profile(step, 2 if quick else 3, top=15)
    finally:
        keras.mixed_precision.set_global_policy("float32")
        keras.config.set_image_data_format("channels_last")
    return r


def torch_resnet(amp: bool, batch: int, quick: bool, compile_: bool = False) -> dict:
    """torchvision ResNet-50, channels_last, optional bf16 autocast and torch.compile."""
    import torch
    import torchvision

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

    t = time.perf_counter()
    r = timed(step, batch, 2 if quick else 15, 2 if quick else 20)
    r["seconds_incl_warmup_compile"] = round(time.perf_counter() - t, 1)
    if not compile_:
        r["profile"] = profile(step, 2 if quick else 3, top=10)
    return r


def run_resnet(args, out: Path) -> dict:
    import torch

    torch.backends.cudnn.benchmark = True
    b = min(args.batch, 16) if args.quick else args.batch
    plan = [("keras float32", lambda: keras_resnet("float32", b, args.quick)),
            ("keras mixed_bfloat16", lambda: keras_resnet("mixed_bfloat16", b, args.quick)),
            ("keras mixed_bfloat16 channels_first (diagnosis)",
             lambda: keras_resnet("mixed_bfloat16", b, args.quick, "channels_first")),
            ("torchvision float32", lambda: torch_resnet(False, b, args.quick)),
            ("torchvision amp-bf16", lambda: torch_resnet(True, b, args.quick))]
    if args.compile:
        plan.append(("torchvision amp-bf16 torch.compile",
                     lambda: torch_resnet(True, b, args.quick, compile_=True)))
    res, tables = {"batch": b, "cudnn_benchmark": True}, []
    for name, fn in plan:
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - one failed variant must not end the run
            r = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        prof = r.pop("profile", None)
        if prof:
            tables.append(f"== {name} (batch {b})\n{prof.pop('table')}")
            r["profile"] = prof
        res[name] = r
        say(f"resnet50 {name} img/s", r.get("img_per_s", r.get("error")), f"(batch {b})",
            windows=r.get("windows"), profile=r.get("profile"))
        save(out, "resnet.json", res)
    (out / "resnet_profiles.txt").write_text("\n\n".join(tables) + "\n")
    return res


def main(argv=None) -> None:
    global VERBOSE
    sys.path.insert(0, str(ROOT))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep", help="host: tokenise the IMDB CSV into .gpudata/*.npz")
    p.add_argument("--csv", default=str(ROOT.parent / "shared/data/imdb/imdb_50k.csv.gz"))
    p.add_argument("--dest", type=Path, default=DATA)
    r = sub.add_parser("run", help="GPU: run measurements")
    r.add_argument("what", nargs="+", choices=["imdb", "share", "resnet"])
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or
                                                    ROOT / "benchmarks/results/gpu"))
    r.add_argument("--quick", action="store_true", help="a few steps of each (smoke run)")
    r.add_argument("--rows", type=int, default=0, help="IMDB rows per split (0: all 25,000)")
    r.add_argument("--k", type=int, nargs="+", default=[2, 4, 8])
    r.add_argument("--batch", type=int, default=256, help="ResNet-50 batch size")
    r.add_argument("--compile", action="store_true", help="also torchvision + torch.compile")
    w = sub.add_parser("share-worker")
    w.add_argument("--k", type=int, required=True)
    w.add_argument("--index", type=int, required=True)
    w.add_argument("--barrier", required=True)
    w.add_argument("--rows", type=int, default=0)
    for q in (r, w):
        q.add_argument("--data", type=Path, default=DATA)
        q.add_argument("--reserve-mib", type=int, default=1024,
                       help="KFP_GPU_RESERVE_MIB: headroom for the CUDA context")
        q.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "prep":
        return prep(args.csv, args.dest)
    os.environ.setdefault("KERAS_BACKEND", "torch")
    VERBOSE = args.verbose
    if args.cmd == "share-worker":
        return share_worker(args)
    env = environment()
    say("device", env.get("gpu"), "", **env)
    save(args.out, "env.json", env)
    for what in args.what:
        {"imdb": run_imdb, "share": run_share, "resnet": run_resnet}[what](args, args.out)


if __name__ == "__main__":
    main()
