"""``kfp-gpu mpijob run-local FILE``: run an MPIJob (or a TrainJob with its runtime) YAML/JSON
file in local containers.

:func:`run_local` is the command (the CLI wires it into the typer app); :func:`main` is a
standalone entry point (``python -m kfp_gpu.cli.run_local FILE --pvc CLAIM=DIR``).
See :mod:`kfp_gpu.mpi.local.runner` and docs/local-mpijob.md.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from kfp_gpu.mpi.local import runner as local_runner

#: Exit status after SIGTERM / SIGINT (128 + 15, the shell convention).
EXIT_CANCELLED = 143
#: The runtime a TrainJob runs on unless ``--runtime`` names another file: the
#: ``kfp-gpu-horovod`` ClusterTrainingRuntime of this checkout.
DEFAULT_RUNTIME_FILE = (Path(__file__).resolve().parents[2] / "manifests" / "trainer"
                        / "horovod-runtime.yaml")


def load_doc(path: str | Path, kinds: Sequence[str], name: str | None = None) -> dict:
    """The first document of a YAML (or JSON) file whose ``kind`` is in ``kinds`` (and,
    if given, whose ``metadata.name`` is ``name``).

    Raises:
        ValueError: the file holds no such document.
    """
    import yaml

    docs = [d for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8"))
            if isinstance(d, Mapping)]
    for doc in docs:
        if doc.get("kind") in kinds and name in (None, (doc.get("metadata") or {}).get("name")):
            return dict(doc)
    want = f"kind {' or '.join(kinds)}" + (f" named {name!r}" if name else "")
    raise ValueError(f"{path}: no document with {want} (found "
                     f"{[(d.get('kind'), (d.get('metadata') or {}).get('name')) for d in docs]})")


def load_mpijob(path: str | Path) -> dict:
    """The first ``kind: MPIJob`` document of a YAML (or JSON) file.

    Raises:
        ValueError: the file holds no MPIJob document.
    """
    return load_doc(path, ("MPIJob",))


def load_job(path: str | Path, runtime: str | Path | None = None) -> tuple[dict, dict | None]:
    """(job, runtime): the first MPIJob or TrainJob of ``path``; for a TrainJob also the
    runtime its ``runtimeRef`` names, from ``runtime`` (default :data:`DEFAULT_RUNTIME_FILE`).

    Raises:
        ValueError: no such job or runtime document; ``runtime`` given for an MPIJob.
    """
    job = load_doc(path, ("MPIJob", "TrainJob"))
    if job["kind"] == "MPIJob":
        if runtime is not None:
            raise ValueError("--runtime is for a TrainJob; the file holds an MPIJob")
        return job, None
    runtime = runtime or DEFAULT_RUNTIME_FILE
    if not Path(runtime).is_file():
        raise ValueError(f"runtime file {runtime} not found: pass --runtime FILE with the "
                         "ClusterTrainingRuntime the TrainJob references")
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    return job, load_doc(runtime, ("ClusterTrainingRuntime", "TrainingRuntime"),
                         ref.get("name"))


def parse_pvc(items: Sequence[str]) -> dict[str, str]:
    """``["CLAIM=DIR", ...]`` -> {claim: dir}.

    Raises:
        ValueError: an item without ``=`` or with an empty side.
    """
    out = {}
    for item in items:
        claim, sep, folder = item.partition("=")
        if not sep or not claim or not folder:
            raise ValueError(f"invalid --pvc {item!r}: accepted is CLAIM=DIR, e.g. "
                             "--pvc resnet-shared=/tmp/shared")
        out[claim] = folder
    return out


def _follow_launcher(runner: local_runner.LocalMPIJobRunner, stop: threading.Event) -> None:
    """Print the Launcher's output as it comes (restarts included) until ``stop``."""
    seen = set()
    while not stop.is_set():
        for c in runner.containers("launcher"):
            if c.id in seen:
                continue
            seen.add(c.id)
            for chunk in c.logs(stream=True, follow=True):
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        stop.wait(0.5)


def _status_printer():
    """An ``on_status`` callback printing each new condition (not replica-count changes)."""
    shown: list = []

    def show(status: dict) -> None:
        if not status["conditions"]:  # a TrainJob has none until it finishes
            return
        last = status["conditions"][-1]
        key = (last.get("type"), last.get("status"), last.get("reason"))
        if key != (shown[-1] if shown else None):
            shown.append(key)
            print(f"status: {key[0]}={key[1]} {key[2]}: {last.get('message')}",
                  file=sys.stderr, flush=True)

    return show


def run_local(file: str | Path, *, pvc: Sequence[str] = (), image: str | None = None,
              replace: bool = False, keep: bool = False, ready_timeout_s: float = 120.0,
              runtime: str | Path | None = None) -> int:
    """Run the MPIJob (or TrainJob) in ``file`` as local containers; print Launcher output
    and status.

    Args:
        file: YAML/JSON with a ``kubeflow.org/v2beta1`` MPIJob (``kfp-gpu`` writes one with
            ``mpijob.to_yaml``) or a ``trainer.kubeflow.org/v1alpha1`` TrainJob
            (``trainjob.to_yaml``).
        pvc: ``CLAIM=DIR`` items: the local folder standing in for each PVC.
        image: replace every pod template's image (e.g. a locally built tag).
        replace: delete what an earlier run of the same job left first.
        keep: leave containers, network and workspace in place afterwards (inspect them
            with ``docker ps -a --filter label=kfp-gpu.local-mpijob``).
        ready_timeout_s: seconds the Workers get to run and listen.
        runtime: for a TrainJob, the YAML/JSON file with the runtime it references
            (default :data:`DEFAULT_RUNTIME_FILE`).

    Returns:
        0 if the MPIJob Succeeded (TrainJob: Complete), 1 if it Failed, 143 after
        SIGTERM/SIGINT (the job's containers are deleted first).

    Raises:
        ValueError: bad file, bad ``--pvc``, unsupported volume kinds, no runtime.
    """
    job, runtime_obj = load_job(file, runtime)
    runner = local_runner.LocalMPIJobRunner(job, runtime=runtime_obj, pvc_dirs=parse_pvc(pvc),
                                            image=image, ready_timeout_s=ready_timeout_s,
                                            on_status=_status_printer())
    if replace:
        runner.delete()
    stop = threading.Event()

    def cancel(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, cancel)
    follower = threading.Thread(target=_follow_launcher, args=(runner, stop), daemon=True)
    try:
        runner.start()
        follower.start()
        runner.wait()
    except KeyboardInterrupt:
        runner.delete()
        print(f"cancelled: {runner.plan.kind} containers deleted", file=sys.stderr)
        return EXIT_CANCELLED
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        if not keep:
            runner.delete()
    return 0 if runner.status.is_success() else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point with the options of :func:`run_local`."""
    p = argparse.ArgumentParser(prog="kfp-gpu mpijob run-local", description=__doc__)
    p.add_argument("file")
    p.add_argument("--pvc", action="append", default=[], metavar="CLAIM=DIR")
    p.add_argument("--image", default=None)
    p.add_argument("--replace", action="store_true")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--ready-timeout", type=float, default=120.0)
    p.add_argument("--runtime", default=None)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_local(a.file, pvc=a.pvc, image=a.image, replace=a.replace, keep=a.keep,
                     ready_timeout_s=a.ready_timeout, runtime=a.runtime)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
