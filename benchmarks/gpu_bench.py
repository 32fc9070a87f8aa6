"""On a real GPU: the project's trainers beside plain framework references, in one run.

The lent GPU machine has PyTorch and JAX but no TensorFlow, so the Keras models of this
suite run there under Keras 3's ``jax`` and ``torch`` backends (keras 3.15.1 and its missing
needs, namex and optree, travel as wheels). Every measurement runs in a process of its own
(benchmarks/gpu_variants.py; the backend is fixed per process), one after another on the
same GPU, so the ratios printed at the end compare figures of one run. Figures and
commands: docs/benchmarks.md, section GPU; raw outputs in benchmarks/results/gpu/<gpu>-<date>/. Not a
test (pytest collects tests/ only); CI never runs it.

Commands::

    # host, project venv (TensorFlow): tokenise IMDB exactly as components/prep_text does
    .venv/bin/python benchmarks/gpu_bench.py prep --csv ../shared/data/imdb/imdb_50k.csv.gz
    # GPU machine: the three measurements, JSON + profiles into --out, a ratio table last
    python3 benchmarks/gpu_bench.py run resnet imdb share --out "$OUT" [--budget S] [-v]

1. ``resnet``: kfp_gpu.training.resnet_models.build("resnet50") compiled as Keras compiles it
   (XLA under jax with ``jit_compile=True``; eager and torch.compile under torch), float32
   and mixed_bfloat16, against torchvision ResNet-50 (channels_last, bf16 autocast);
   synthetic 224x224 batches resident on the GPU; img/s per GPU and a profile of the GPU
   kernels per step.
2. ``imdb``: kfp_gpu.training.text_model.build_model (Embedding -> LSTM(128) -> Dense),
   batch 32, maxlen 80, 25k/25k, 2 epochs, under each backend, against a plain PyTorch
   ``nn.LSTM``; s/epoch, test accuracy, and whether the cuDNN LSTM kernel ran.
3. ``share``: K processes at once, each capped at 1/K by kfp_gpu.gpu.memory_cap.plan (the
   project's share -> MiB arithmetic, ``KFP_GPU_RESERVE_MIB`` headroom) mapped to the
   backend's cap, each training one IMDB epoch behind a start barrier; OOMs, memory per
   process (nvidia-smi) against the share, aggregate samples/s against one process.
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

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = Path(__file__).with_name("gpu_variants.py")
DATA = ROOT / ".gpudata" / "imdb_maxlen80.npz"
MAXLEN, NUM_WORDS, BATCH = 80, 20000, 32
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


def environment() -> dict:
    """Versions and the GPU as nvidia-smi, torch and JAX see it (no Keras import here)."""
    import importlib.metadata as md

    info = {"python": sys.version.split()[0]}
    for pkg in ("torch", "torchvision", "jax", "jaxlib", "keras"):
        try:
            info[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            info[pkg] = None
    try:
        import torch

        info.update(torch_cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    except ImportError:
        pass
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


class Runner:
    """Runs variants as subprocesses within a time budget; each returns one RESULT line."""

    def __init__(self, budget_s: float, verbose: bool):
        self.deadline = time.monotonic() + budget_s
        self.verbose = verbose

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def start(self, backend: str, spec: dict) -> subprocess.Popen:
        env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONUNBUFFERED": "1"}
        return subprocess.Popen([sys.executable, str(VARIANTS), json.dumps(spec)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def collect(proc: subprocess.Popen, timeout: float) -> dict:
        try:
            out, _ = proc.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            return {"error": f"timed out after {timeout:.0f} s", "log_tail": out[-1500:]}
        line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("RESULT ")), None)
        if line is None:
            return {"error": f"exit {proc.returncode}", "log_tail": out[-1500:]}
        res = json.loads(line[7:])
        if VERBOSE:
            print(out[-3000:].replace(line, "")[-2000:], flush=True)
        return res

    def run(self, backend: str, spec: dict, timeout: float) -> dict:
        """One variant; skipped (``{"skipped": ...}``) when the budget cannot hold it."""
        if self.left() < min(timeout, 60):
            return {"skipped": f"{self.left():.0f} s of the budget left"}
        t = time.monotonic()
        res = self.collect(self.start(backend, spec), min(timeout, self.left()))
        res["process_s"] = round(time.monotonic() - t, 1)
        return res


def keep_profile(res: dict, tables: list, title: str) -> None:
    prof = res.pop("profile", None)
    if prof:
        tables.append(f"== {title}\n{prof.pop('table', '')}")
        res["profile"] = prof


def plan(args) -> list[tuple]:
    """``(section, name, backend, spec, timeout s)`` in priority order: the references and
    the candidates for the trainers' GPU defaults first, then the "before" figures (the
    suite's earlier settings) and extra shares, so a short budget cuts the least useful."""
    q, b = args.quick, (min(args.batch, 16) if args.quick else args.batch)
    epochs = 1 if q else 2
    kr = {"fn": "keras_resnet", "batch": b, "quick": q}
    ki = {"fn": "keras_imdb", "data": str(args.data), "rows": args.rows, "epochs": epochs,
          "extra": {}, "quick": q}
    spe = f"keras jax xla steps_per_execution={args.spe}"
    steps = [
        ("resnet", "torchvision amp-bf16", "torch",
         {"fn": "torch_resnet", "batch": b, "quick": q, "compile_": False, "amp": True}, 150),
        # the trainers' GPU defaults (precision_plan, jit_compile_for) under the jax backend
        ("resnet", "keras jax mixed_bfloat16 xla", "jax", {**kr, "policy": "auto", "jit": None},
         240),
        ("imdb", "keras jax xla", "jax", {**ki, "jit": None, "spe": 1}, 150),
        ("imdb", "torch_reference", "torch",
         {"fn": "torch_lstm", "data": str(args.data), "rows": args.rows, "epochs": epochs,
          "quick": q}, 90),
        ("imdb", spe, "jax", {**ki, "jit": True, "spe": args.spe}, 150),
        ("share", 1, args.share_backend, None, 240),
        ("share", max(args.k), args.share_backend, None, 300),
        ("resnet", "keras mixed_bfloat16", "torch",
         {**kr, "policy": "mixed_bfloat16", "jit": False}, 150),
        ("imdb", "cudnn", "torch", {**ki, "jit": None, "spe": 1}, 150),
        *[("share", k, args.share_backend, None, 240) for k in sorted(args.k)[:-1]],
        ("resnet", "keras jax float32 xla", "jax", {**kr, "policy": "float32", "jit": True}, 240),
    ]
    if args.compile:
        steps.append(("resnet", "keras torch mixed_bfloat16 torch.compile", "torch",
                      {**kr, "policy": "mixed_bfloat16", "jit": True}, 300))
    return steps


def report(section: str, name, r: dict) -> None:
    """The default output: one or two lines per measurement."""
    why = r.get("error") or r.get("skipped")
    if section == "resnet":
        say(f"resnet50 {name} img/s", r.get("img_per_s", why), f"(batch {r.get('batch')})",
            windows=r.get("windows"), profile=r.get("profile"), log=r.get("log_tail"))
    elif section == "imdb":
        say(f"imdb {name} s/epoch", r.get("steady_s_per_epoch", why), "s",
            epochs=r.get("epoch_seconds"), ops=r.get("lstm_ops_seen"), log=r.get("log_tail"))
        if "test_accuracy" in r:
            say(f"imdb {name} test accuracy", round(r["test_accuracy"], 4),
                f"(cuDNN kernel seen: {r.get('cudnn_kernel_used', 'n/a')})")
    else:
        say(f"share K={name} ok/oom", f"{r['ok']}/{r['oom']}", r.get("skipped", ""),
            errors=[p.get("error") for p in r.get("processes", []) if p.get("error")][:2])
        if r.get("aggregate_samples_per_s"):
            say(f"share K={name} aggregate samples/s", r["aggregate_samples_per_s"],
                f"({r.get('vs_one_process')}x one process)",
                per_process=r.get("per_process_samples_per_s"))
            say(f"share K={name} MiB per process (nvidia-smi)", r.get("max_smi_used_mib"),
                f"of {r.get('share_mib')} MiB share, within={r.get('within_share')}")


def share_group(args, runner: Runner, k: int) -> dict:
    """Start K capped workers at once (one IMDB epoch each) and gather their results."""
    if runner.left() < 90:
        return {"k": k, "skipped": f"{runner.left():.0f} s of the budget left", "ok": 0,
                "oom": 0}
    with tempfile.TemporaryDirectory() as barrier:
        spec = {"fn": "share_worker", "data": str(args.data), "rows": args.rows, "k": k,
                "barrier": barrier, "reserve_mib": args.reserve_mib, "jit": True,
                "spe": args.spe if args.share_backend == "jax" else 1}
        procs = [runner.start(args.share_backend, {**spec, "index": i}) for i in range(k)]
        recs = [runner.collect(p, min(300, runner.left())) for p in procs]
    ok = [r for r in recs if "end" in r]
    res = {"k": k, "backend": args.share_backend, "processes": recs, "ok": len(ok),
           "oom": sum(bool(r.get("oom")) for r in recs)}
    if ok:
        span = max(r["end"] for r in ok) - min(r["start"] for r in ok)
        res["aggregate_samples_per_s"] = round(sum(r["samples"] for r in ok) / span, 1)
        res["per_process_samples_per_s"] = [round(r["samples"] / (r["end"] - r["start"]), 1)
                                            for r in ok]
        used = [r.get("smi_used_mib") or 0 for r in ok]
        res["max_smi_used_mib"], res["share_mib"] = max(used), ok[0]["share_mib"]
        res["within_share"] = all(u <= (r["share_mib"] or 1e12) for u, r in zip(used, ok))
    return res


def run_all(args, runner: Runner, out: Path) -> dict:
    """Run the plan's sections asked for; save each section's JSON after every step."""
    res = {"resnet": {"batch": min(args.batch, 16) if args.quick else args.batch},
           "imdb": {}, "share": {"groups": []}}
    tables = {"resnet": [], "imdb": []}
    for section, name, backend, spec, timeout in plan(args):
        if section not in args.what:
            continue
        if section == "share":
            r = share_group(args, runner, name)
            groups = sorted(res["share"]["groups"] + [r], key=lambda g: g["k"])
            res["share"]["groups"] = groups
            base = groups[0].get("aggregate_samples_per_s") if groups[0]["k"] == 1 else None
            for g in groups:
                g["vs_one_process"] = ratio(g.get("aggregate_samples_per_s"), base)
        else:
            r = runner.run(backend, spec, timeout)
            keep_profile(r, tables[section], f"{name} (batch {r.get('batch', BATCH)})")
            res[section][name] = r
            (out / f"{section}_profiles.txt").write_text("\n\n".join(tables[section]) + "\n")
        report(section, name, r)
        save(out, f"{section}.json", res[section])
    return {k: v for k, v in res.items() if k in args.what}


def ratio(a, b):
    return round(a / b, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b \
        else None


def summary(res: dict) -> list[str]:
    """The closing table: the project's trainers over the framework references (one run)."""
    rows = []
    r = res.get("resnet") or {}
    ref = (r.get("torchvision amp-bf16") or {}).get("img_per_s")
    for name, v in r.items():
        if isinstance(v, dict) and "keras" in name:
            rows.append(f"resnet50 {name}: {v.get('img_per_s')} img/s = "
                        f"{ratio(v.get('img_per_s'), ref)}x torchvision amp-bf16 ({ref} img/s)")
    i = res.get("imdb") or {}
    ref = (i.get("torch_reference") or {}).get("steady_s_per_epoch")
    for name, v in i.items():
        if name != "torch_reference" and isinstance(v, dict):
            rows.append(f"imdb {name}: {v.get('steady_s_per_epoch')} s/epoch, accuracy "
                        f"{round(v.get('test_accuracy') or 0, 4)} = {ratio(ref, v.get('steady_s_per_epoch'))}x "
                        f"the speed of plain PyTorch nn.LSTM ({ref} s/epoch)")
    for g in (res.get("share") or {}).get("groups", []):
        rows.append(f"share K={g['k']}: {g['ok']} ok, {g['oom']} OOM, "
                    f"{g.get('aggregate_samples_per_s')} samples/s = {g.get('vs_one_process')}x "
                    f"one process")
    return rows


def main(argv=None) -> None:
    global VERBOSE
    sys.path.insert(0, str(ROOT))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prep", help="host: tokenise the IMDB CSV into .gpudata/*.npz")
    p.add_argument("--csv", default=str(ROOT.parent / "shared/data/imdb/imdb_50k.csv.gz"))
    p.add_argument("--dest", type=Path, default=DATA)
    r = sub.add_parser("run", help="GPU: run measurements")
    r.add_argument("what", nargs="+", choices=["resnet", "imdb", "share"])
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or
                                                    ROOT / "benchmarks/results/gpu"))
    r.add_argument("--quick", action="store_true", help="a few steps of each (smoke run)")
    r.add_argument("--rows", type=int, default=0, help="IMDB rows per split (0: all 25,000)")
    r.add_argument("--k", type=int, nargs="+", default=[2, 4, 8])
    r.add_argument("--batch", type=int, default=256, help="ResNet-50 batch size")
    r.add_argument("--spe", type=int, default=32, help="IMDB steps_per_execution to try")
    r.add_argument("--share-backend", default="jax", choices=["jax", "torch"])
    r.add_argument("--compile", action="store_true", help="also Keras torch + torch.compile")
    r.add_argument("--budget", type=float, default=480, help="seconds for the whole run")
    r.add_argument("--data", type=Path, default=DATA)
    r.add_argument("--reserve-mib", type=int, default=1024,
                   help="KFP_GPU_RESERVE_MIB: headroom for the CUDA context")
    r.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "prep":
        return prep(args.csv, args.dest)
    VERBOSE = args.verbose
    env = environment()
    say("device", env.get("gpu"), "", **env)
    save(args.out, "env.json", env)
    res = run_all(args, Runner(args.budget, args.verbose), args.out)
    print("\n".join(["", "== summary (one run, same GPU)"] + summary(res)), flush=True)


if __name__ == "__main__":
    main()
