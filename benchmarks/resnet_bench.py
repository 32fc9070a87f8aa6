"""ResNet / Horovod throughput: img/sec for 1 vs N MPI processes, FP32 vs mixed precision + XLA.

Runs the project's trainer (``python -m kfp_gpu.cli.train_resnet --mode benchmark``, synthetic
images, warm-up steps excluded -- the measure of Horovod's
``tensorflow2_synthetic_benchmark.py``) under ``mpirun`` and collects rank 0's metrics.

Modes:
- ``cpu`` (default): scaling on this machine. 1 and 2 processes are run alternately,
  ``--repeats`` times each, and the medians compared: scaling efficiency =
  img/sec total(2) / (2 x img/sec(1)). On CPU every process gets cpu_count/local_size
  intra-op threads, so this measures what the allreduce and the split cost on the same
  cores, not a speed-up. Default model: the small ResNet (``--model small``, ResNet-14,
  width 16) on 32x32x3, batch 32 per process.
- ``gpu``: ResNet-50 on 224x224x3 on ``--np`` GPUs (default 1), FP32 vs
  ``--mixed-precision --xla``, batch 64/128/256 per GPU. Needs GPUs; refuses to run
  without one.

``--write-docs`` replaces the ``## ResNet / Horovod`` section of docs/benchmarks.md.

Example: ``python benchmarks/resnet_bench.py --mode cpu --repeats 2 --write-docs``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

# kfp_gpu first: protobuf 6 dropped MessageFactory.GetPrototype, which TensorFlow 2.18 calls
# at import (five AttributeError tracebacks); kfp_gpu._compat restores it (README, pins).
import kfp_gpu  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "benchmarks.md"
HEADING = "## ResNet / Horovod"


def trainer(np_: int, flags: list[str], timeout: int = 1800) -> dict:
    """Run the benchmark trainer under ``mpirun -np np_``; rank 0's METRICS dict."""
    mpirun = Path(sys.executable).parent / "mpirun"
    cmd = [str(mpirun) if mpirun.exists() else "mpirun", "-np", str(np_), "--oversubscribe",
           "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-m", "kfp_gpu.cli.train_resnet", "--mode", "benchmark", *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    line = next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("METRICS "))
    return json.loads(line[len("METRICS "):])


def machine() -> str:
    try:
        model = next(ln.split(":", 1)[1].strip() for ln in
                     subprocess.run(["lscpu"], capture_output=True, text=True,
                                    check=False).stdout.splitlines()
                     if ln.startswith("Model name"))
    except StopIteration:
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} CPUs (nproc), {platform.system()} {platform.release()}"


def cpu_mode(a) -> tuple[list[dict], str]:
    flags = ["--model", a.model, "--image-size", str(a.image_size), "--classes", "10",
             "--batch-size", str(a.batch_size), "--steps", str(a.steps),
             "--warmup-steps", str(a.warmup_steps)]
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for rep in range(a.repeats):
        for n in (1, 2):
            print(f"run {rep + 1}/{a.repeats}, np={n}: {a.warmup_steps} warm-up + {a.steps} "
                  f"timed steps of {a.model} ...", flush=True)
            m = trainer(n, flags)
            runs[n].append(m)
            print(f"np={n}: {m['img_per_sec_per_gpu']:.1f} img/sec per process, "
                  f"total {m['img_per_sec_total']:.1f}", flush=True)
    one = statistics.median(m["img_per_sec_total"] for m in runs[1])
    two_total = statistics.median(m["img_per_sec_total"] for m in runs[2])
    two_per = statistics.median(m["img_per_sec_per_gpu"] for m in runs[2])
    rows = [
        {"processes": 1, "img_per_sec_per_process": one, "img_per_sec_total": one,
         "ms_per_step": 1000 * a.batch_size / one, "scaling_efficiency": 1.0,
         "runs": [round(m["img_per_sec_total"], 1) for m in runs[1]]},
        {"processes": 2, "img_per_sec_per_process": two_per, "img_per_sec_total": two_total,
         "ms_per_step": 1000 * a.batch_size / two_per,
         "scaling_efficiency": two_total / (2 * one),
         "runs": [round(m["img_per_sec_total"], 1) for m in runs[2]]},
    ]
    model = runs[1][0]["model"]
    params = runs[1][0]["parameters"]
    table = [("| MPI processes | img/sec per process | img/sec total | ms/step | scaling "
              "efficiency | total vs 1 process | runs (total img/sec) |"),
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['processes']} | {r['img_per_sec_per_process']:.1f} | "
                     f"{r['img_per_sec_total']:.1f} | {r['ms_per_step']:.1f} | "
                     f"{r['scaling_efficiency']:.2f} | {r['img_per_sec_total'] / one:.2f} | "
                     f"{r['runs']} |")
    note = (f"Model `{model}` ({params:,} parameters), synthetic {a.image_size}x"
            f"{a.image_size}x3, batch {a.batch_size} per process, {a.steps} timed steps after "
            f"{a.warmup_steps} warm-up steps, median of {a.repeats} alternating runs each.")
    return rows, note + "\n\n" + "\n".join(table)


def gpu_mode(a) -> tuple[list[dict], str]:
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        raise SystemExit("gpu mode needs a GPU (none visible to TensorFlow); nothing measured")
    rows = []
    for batch in a.batches:
        for label, extra in (("FP32", []), ("mixed precision + XLA",
                                            ["--mixed-precision", "--xla"])):
            print(f"batch {batch}, {label}: {a.warmup_steps} warm-up + {a.steps} timed steps "
                  "...", flush=True)
            m = trainer(a.np, ["--model", "resnet50", "--image-size", "224", "--batch-size",
                               str(batch), "--steps", str(a.steps), "--warmup-steps",
                               str(a.warmup_steps), *extra])
            rows.append({"batch": batch, "precision": label, **{k: m[k] for k in (
                "img_per_sec_per_gpu", "img_per_sec_total", "ms_per_step", "world_size")}})
            print(rows[-1], flush=True)
    table = ["| batch/GPU | precision | GPUs | img/sec per GPU | img/sec total | ms/step |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['batch']} | {r['precision']} | {r['world_size']} | "
                     f"{r['img_per_sec_per_gpu']:.1f} | {r['img_per_sec_total']:.1f} | "
                     f"{r['ms_per_step']:.1f} |")
    gpu = tf.config.experimental.get_device_details(
        tf.config.list_physical_devices("GPU")[0]).get("device_name", "GPU")
    return rows, f"ResNet-50 (weights=None), synthetic 224x224x3, {gpu}.\n\n" + "\n".join(table)


def write_docs(body: str) -> None:
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n"
    if HEADING not in text:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n(pending)\n"
    head, _, rest = text.partition(HEADING)
    nxt = rest.find("\n## ")
    tail = rest[nxt:] if nxt >= 0 else "\n"
    DOCS.write_text(f"{head}{HEADING}\n\n{body.strip()}\n{tail}", encoding="utf-8")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--model", default="small", choices=("small", "resnet50"))
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--np", type=int, default=1, help="GPUs (gpu mode)")
    p.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256])
    p.add_argument("--write-docs", action="store_true")
    p.add_argument("--docs-section", default="", help="extra text kept under the table")
    a = p.parse_args()
    rows, table = cpu_mode(a) if a.mode == "cpu" else gpu_mode(a)
    argv = sys.argv[1:]
    if "--docs-section" in argv:  # the note is not part of the measurement command
        i = argv.index("--docs-section")
        argv = argv[:i] + argv[i + 2:]
    cmd = "python benchmarks/resnet_bench.py " + " ".join(argv)
    body = (f"{a.mode.upper()} run of {dt.date.today().isoformat()} on {machine()}; "
            f"Horovod 0.28.1 (MPI controller, OpenMPI 4.1.8), TensorFlow "
            f"{__import__('tensorflow').__version__}.\nCommand: `{cmd}`\n\n{table}\n")
    print(json.dumps(rows, indent=2))
    print(body)
    if a.write_docs:
        write_docs(body + ("\n" + a.docs_section if a.docs_section else ""))
    print(one_line(a, rows))


def one_line(a, rows: list[dict]) -> str:
    """The benchmark's figure in one line."""
    if a.mode == "cpu":
        one, two = rows
        return (f"resnet_bench cpu ({a.model}, {a.image_size}x{a.image_size}): "
                f"{one['img_per_sec_total']:.1f} img/sec with 1 process, "
                f"{two['img_per_sec_total']:.1f} img/sec total with 2 "
                f"(scaling efficiency {two['scaling_efficiency']:.2f})")
    return "resnet_bench gpu (ResNet-50): " + "; ".join(
        f"batch {r['batch']} {r['precision']} {r['img_per_sec_per_gpu']:.1f} img/sec per GPU"
        for r in rows)


if __name__ == "__main__":
    main()
