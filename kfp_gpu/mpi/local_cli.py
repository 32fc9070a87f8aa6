"""``kfp-gpu mpijob run-local FILE``: run an MPIJob YAML/JSON file in local containers.

:func:`run_local` is the command (the CLI wires it into the typer app); :func:`main` is a
standalone entry point (``python -m kfp_gpu.mpi.local_cli FILE --pvc CLAIM=DIR``).
See :mod:`kfp_gpu.mpi.local_runner` and docs/local-mpijob.md.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from kfp_gpu.mpi import local_runner

#: Exit status after SIGTERM / SIGINT (128 + 15, the shell convention).
EXIT_CANCELLED = 143


def load_mpijob(path: str | Path) -> dict:
    """The first ``kind: MPIJob`` document of a YAML (or JSON) file.

    Raises:
        ValueError: the file holds no MPIJob document.
    """
    import yaml

    docs = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "MPIJob":
            return dict(doc)
    raise ValueError(f"{path}: no document with kind: MPIJob (found kinds "
                     f"{[d.get('kind') for d in docs if isinstance(d, Mapping)]})")


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
        last = status["conditions"][-1] if status["conditions"] else {}
        key = (last.get("type"), last.get("status"), last.get("reason"))
        if key != (shown[-1] if shown else None):
            shown.append(key)
            print(f"status: {key[0]}={key[1]} {key[2]}: {last.get('message')}",
                  file=sys.stderr, flush=True)

    return show


def run_local(file: str | Path, *, pvc: Sequence[str] = (), image: str | None = None,
              replace: bool = False, keep: bool = False, ready_timeout_s: float = 120.0,
              ) -> int:
    """Run the MPIJob in ``file`` as local containers; print Launcher output and status.

    Args:
        file: YAML/JSON with a ``kubeflow.org/v2beta1`` MPIJob (``kfp-gpu`` writes one with
            ``mpijob.to_yaml``).
        pvc: ``CLAIM=DIR`` items: the local folder standing in for each PVC.
        image: replace every pod template's image (e.g. a locally built tag).
        replace: delete what an earlier run of the same job left first.
        keep: leave containers, network and workspace in place afterwards (inspect them
            with ``docker ps -a --filter label=kfp-gpu.local-mpijob``).
        ready_timeout_s: seconds the Workers get to run and listen.

    Returns:
        0 if the MPIJob Succeeded, 1 if it Failed, 143 after SIGTERM/SIGINT (the job's
        containers are deleted first).

    Raises:
        ValueError: bad file, bad ``--pvc``, unsupported volume kinds.
    """
    runner = local_runner.LocalMPIJobRunner(load_mpijob(file), pvc_dirs=parse_pvc(pvc),
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
        status = runner.wait()
    except KeyboardInterrupt:
        runner.delete()
        print("cancelled: MPIJob containers deleted", file=sys.stderr)
        return EXIT_CANCELLED
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        if not keep:
            runner.delete()
    ok = any(c["type"] == "Succeeded" and c["status"] == "True" for c in status["conditions"])
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point with the options of :func:`run_local`."""
    p = argparse.ArgumentParser(prog="kfp-gpu mpijob run-local", description=__doc__)
    p.add_argument("file")
    p.add_argument("--pvc", action="append", default=[], metavar="CLAIM=DIR")
    p.add_argument("--image", default=None)
    p.add_argument("--replace", action="store_true")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--ready-timeout", type=float, default=120.0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_local(a.file, pvc=a.pvc, image=a.image, replace=a.replace, keep=a.keep,
                     ready_timeout_s=a.ready_timeout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
