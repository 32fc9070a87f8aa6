"""K processes sharing one GPU, each capped at 1/K of its memory, vs one uncapped process.

What it measures (GPU only; one command, see docs/gpu-sharing.md):

    python benchmarks/gpu_share_bench.py --k 4 8 --out bench_gpu_share.json

For each K it starts K worker processes at once on GPU 0. Each worker gets the environment a
``fraction:1/K`` request sets (kfp_gpu.gpu), calls ``kfp_gpu.gpu.memory_cap.apply_gpu_share()``
(TensorFlow logical-device ``memory_limit`` = floor(total/K) MiB) and trains the IMDB model
of this suite (Embedding -> cuDNN LSTM(128) -> Dense(sigmoid), maxlen 80, vocabulary 20000;
synthetic token ids, so no data download) for ``--seconds`` after a warm-up, behind a
start barrier so the K measurement windows overlap. Baseline: K = 1 with the ``gpu:1``
environment (no cap). Optional ``--uncapped-k`` also starts K processes WITHOUT the cap, to
show what the cap prevents (TensorFlow's default allocator reserves nearly all device
memory in the first process, so the others fail at start).

Reported per configuration: processes ok / failed (out-of-memory is detected in the worker
log), samples/sec per process and aggregate, aggregate / baseline, ms/step, peak device
memory per process (``tf.config.experimental.get_memory_info``) against the cap.

``--allow-cpu`` runs the same harness on CPU (a check of the harness only: the cap is a no-op
there and the numbers say nothing about GPU sharing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOCAB, MAXLEN = 20000, 80


def worker(args) -> None:
    """One process: cap, build, barrier, train for a fixed time, print a JSON line."""
    from kfp_gpu.gpu import memory_cap

    cap = memory_cap.apply_gpu_share()
    import numpy as np
    import tensorflow as tf

    from kfp_gpu.components.train_text_classifier import train as tr

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and not args.allow_cpu:
        raise SystemExit("no GPU visible (use --allow-cpu for a harness check)")
    cfg = tr.TrainConfig(epochs=1, batch_size=args.batch_size, seed=args.index,
                         lr_schedule="constant")  # a timed loop of any length
    model = tr.build_model(cfg, VOCAB, MAXLEN)
    rng = np.random.default_rng(args.index)
    n = args.batch_size * 64
    x = rng.integers(1, VOCAB, size=(n, MAXLEN), dtype=np.int32)
    y = rng.integers(0, 2, size=(n,), dtype=np.int32)
    y = y.astype(np.float32)
    batches = [(x[b:b + args.batch_size], y[b:b + args.batch_size])
               for b in range(0, n, args.batch_size)]

    def step(i):
        xb, yb = batches[i % len(batches)]
        return model.train_on_batch(xb, yb)

    for i in range(args.warmup_steps):
        step(i)
    Path(args.barrier, f"ready-{args.index}").touch()
    deadline = time.time() + 600
    while len(list(Path(args.barrier).glob("ready-*"))) < args.world:
        if time.time() > deadline:
            raise SystemExit("barrier timeout")
        time.sleep(0.05)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        step(steps)  # train_on_batch returns host values: each step is synchronised
        steps += 1
    dt = time.perf_counter() - t0
    peak = 0
    if gpus:
        peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] // (1024 * 1024)
    print("RESULT " + json.dumps({
        "index": args.index, "steps": steps, "seconds": round(dt, 3),
        "samples_per_sec": round(steps * args.batch_size / dt, 1),
        "ms_per_step": round(1000 * dt / steps, 3), "peak_mib": int(peak),
        "limit_mib": cap.get("limit_mib"), "gpu": bool(gpus)}), flush=True)


def run_config(k: int, capped: bool, args) -> dict:
    """Start k workers at once; collect their RESULT lines and failures."""
    from kfp_gpu import gpu

    request = gpu.parse(f"fraction:{1 / k:g}" if (capped and k > 1) else "gpu:1")
    barrier = tempfile.mkdtemp(prefix="gpu-share-")
    procs = []
    for i in range(k):
        env = {**os.environ, **request.env(), "TF_CPP_MIN_LOG_LEVEL": "2"}
        cmd = [sys.executable, __file__, "--worker", "--index", str(i), "--world", str(k),
               "--barrier", barrier, "--seconds", str(args.seconds),
               "--batch-size", str(args.batch_size), "--warmup-steps", str(args.warmup_steps)]
        if args.allow_cpu:
            cmd.append("--allow-cpu")
        log = open(Path(barrier, f"worker-{i}.log"), "w+", encoding="utf-8")  # noqa: SIM115
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       text=True), log))
    deadline = time.time() + args.seconds + 900
    while any(p.poll() is None for p, _ in procs) and time.time() < deadline:
        for i, (p, _) in enumerate(procs):
            if p.poll() not in (None, 0):
                # failed before the barrier (e.g. out of memory): let the others start
                Path(barrier, f"ready-{i}").touch()
        time.sleep(0.2)
    results, failures = [], []
    for i, (p, log) in enumerate(procs):
        if p.poll() is None:
            p.kill()
            p.wait()
        log.seek(0)
        out = log.read()
        log.close()
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        if p.returncode == 0 and lines:
            results.append(json.loads(lines[-1][7:]))
        else:
            oom = any(s in out for s in ("OOM", "out of memory", "OUT_OF_MEMORY",
                                         "ResourceExhausted"))
            failures.append({"index": i, "returncode": p.returncode, "oom": oom,
                             "tail": out[-1500:]})
    agg = sum(r["samples_per_sec"] for r in results)
    return {"k": k, "capped": capped, "request": request.to_text(), "ok": len(results),
            "failed": len(failures), "oom": sum(f["oom"] for f in failures),
            "aggregate_samples_per_sec": round(agg, 1), "processes": results,
            "failures": failures}


def markdown(rows: list[dict], device_name: str) -> str:
    base = next((r for r in rows if r["k"] == 1), None)
    lines = [("| processes | request | ok / failed (OOM) | samples/sec per process (mean) | "
              "aggregate samples/sec | vs 1 uncapped | peak MiB / cap MiB |"),
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ps = r["processes"]
        mean = sum(p["samples_per_sec"] for p in ps) / len(ps) if ps else 0.0
        ratio = (r["aggregate_samples_per_sec"] / base["aggregate_samples_per_sec"]
                 if base and base["aggregate_samples_per_sec"] else float("nan"))
        peak = max((p["peak_mib"] for p in ps), default=0)
        cap = ps[0]["limit_mib"] if ps else None
        lines.append(f"| {r['k']}{'' if r['capped'] else ' (no cap)'} | {r['request']} | "
                     f"{r['ok']} / {r['failed']} ({r['oom']}) | {mean:.0f} | "
                     f"{r['aggregate_samples_per_sec']:.0f} | {ratio:.2f}x | "
                     f"{peak} / {cap if cap else '-'} |")
    return "\n".join([f"Device: {device_name}", "", *lines])


def device_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "no GPU (CPU harness check)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8], help="process counts")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds per process")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--warmup-steps", type=int, default=20)
    ap.add_argument("--uncapped-k", type=int, default=0,
                    help="also run this many processes without the cap (expect failures)")
    ap.add_argument("--out", default="", help="write the results as JSON here")
    ap.add_argument("--allow-cpu", action="store_true", help="harness check on CPU")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    name = device_name()
    if name.startswith("no GPU") and not args.allow_cpu:
        print("no GPU found (nvidia-smi); this benchmark needs one (or --allow-cpu for a "
              "harness check)", file=sys.stderr)
        return 2
    configs = [(1, False)] + [(k, True) for k in args.k if k > 1]
    if args.uncapped_k > 1:
        configs.append((args.uncapped_k, False))
    rows = []
    for k, capped in configs:
        print(f"K={k}{' capped' if capped else ' uncapped'}: starting {k} process(es), "
              f"{args.warmup_steps} warm-up steps, then {args.seconds:g} s measured ...",
              flush=True)
        rows.append(run_config(k, capped, args))
        print(f"  -> {rows[-1]['ok']} ok, {rows[-1]['failed']} failed, "
              f"{rows[-1]['aggregate_samples_per_sec']:.0f} samples/sec aggregate", flush=True)
    report = {"device": name, "batch_size": args.batch_size, "seconds": args.seconds,
              "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(markdown(rows, name))
    base = rows[0]["aggregate_samples_per_sec"] or float("nan")
    print(f"gpu_share ({name}): " + "; ".join(
        f"K={r['k']}{'' if r['capped'] or r['k'] == 1 else ' uncapped'} "
        f"{r['aggregate_samples_per_sec']:.0f} samples/sec ({r['aggregate_samples_per_sec'] / base:.2f}x),"
        f" {r['failed']} failed" for r in rows))
    return 0 if all(r["failed"] == 0 for r in rows if r["capped"] or r["k"] == 1) else 1


if __name__ == "__main__":
    sys.exit(main())
