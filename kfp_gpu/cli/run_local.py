"""``kfp-gpu mpijob run-local FILE``: run an MPIJob (or a TrainJob with its runtime) YAML/JSON
file in local containers.

:func:`run_local` is the command (the CLI wires it into the typer app); :func:`main` is a
standalone entry point (``python -m kfp_gpu.cli.run_local FILE --pvc CLAIM=DIR``).
See :mod:`kfp_gpu.mpi.local.runner` and docs/local-mpijob.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from kfp_gpu.mpi.local import fields
from kfp_gpu.mpi.local import runner as local_runner

#: Exit status after SIGTERM (128 + 15, the shell convention); SIGINT: 130.
EXIT_CANCELLED = 143
#: Exit status when no Docker engine answers (cluster/engine unreachable).
EXIT_UNREACHABLE = 3
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

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file" + (" (a folder)" if p.is_dir() else "")
                         + "; pass the YAML/JSON file of the job")
    try:
        docs = [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8"))
                if isinstance(d, Mapping)]
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        where = getattr(e, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        raise ValueError(f"{path}: not valid YAML/JSON{at}: "
                         f"{getattr(e, 'problem', None) or e}") from None
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
    fields.check(job, str(path))
    if job["kind"] == "MPIJob":
        if runtime is not None:
            raise ValueError("--runtime is for a TrainJob; the file holds an MPIJob")
        return job, None
    runtime = runtime or DEFAULT_RUNTIME_FILE
    if not Path(runtime).is_file():
        raise ValueError(f"runtime file {runtime} not found: pass --runtime FILE with the "
                         "ClusterTrainingRuntime the TrainJob references")
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    rt = load_doc(runtime, ("ClusterTrainingRuntime", "TrainingRuntime"), ref.get("name"))
    fields.check(rt, str(runtime))
    return job, rt


def missing_images(job: Mapping, runtime: Mapping | None = None) -> list[str]:
    """Paths of the pod-template containers without an ``image``: the API server accepts
    such an MPIJob/TrainJob (the CRDs do not require ``image``) but refuses each pod the
    controller then creates (``spec.containers[0].image: Required value``, kubernetes
    pkg/apis/core/validation/validation.go ``validateContainerCommon``), so the job never
    starts. For a TrainJob the runtime's ``node`` containers take ``trainer.image`` when
    the TrainJob sets it (Trainer v2.3.0, see :mod:`kfp_gpu.mpi.local.plan_trainjob`)."""
    trainer_image = ((job.get("spec") or {}).get("trainer") or {}).get("image")
    out: list[str] = []

    def walk(node, path: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("containers", "initContainers") and isinstance(value, list):
                    for i, c in enumerate(value):
                        if isinstance(c, Mapping) and not c.get("image") and not (
                                trainer_image and c.get("name") == "node"):
                            out.append(f"{path}.{key}[{i}]")
                else:
                    walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    walk(job.get("spec"), ".spec")
    if runtime is not None:
        walk(runtime.get("spec"), f"{runtime.get('kind')} .spec")
    return out


def pvc_item(item: str) -> tuple[str, str]:
    """One ``--pvc CLAIM=DIR`` -> ``(claim, folder)``: CLAIM a PersistentVolumeClaim name
    (a DNS-1123 subdomain, :func:`kfp_gpu.dsl.k8s_rules.dns1123_subdomain`), DIR an
    existing folder.

    Raises:
        ValueError: one line naming the item and what is accepted (no option name: the
            caller adds it).
    """
    from kfp_gpu.dsl import k8s_rules

    claim, sep, folder = item.partition("=")
    if not sep or not claim or not folder:
        raise ValueError(f"{item!r}: accepted is CLAIM=DIR, e.g. "
                         "--pvc resnet-shared=/tmp/shared")
    k8s_rules.dns1123_subdomain(claim, f"claim of {item!r}")
    if not Path(folder).expanduser().is_dir():
        raise ValueError(f"{item!r}: {folder} is not an existing folder")
    return claim, folder


def parse_pvc(items: Sequence[str]) -> dict[str, str]:
    """``["CLAIM=DIR", ...]`` -> {claim: dir}, each item by :func:`pvc_item`.

    Raises:
        ValueError: ``invalid --pvc`` and :func:`pvc_item`'s reason.
    """
    out = {}
    for item in items:
        try:
            claim, folder = pvc_item(item)
        except ValueError as e:
            raise ValueError(f"invalid --pvc {e}") from None
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


def _runner_for(file, pvc, image, ready_timeout_s, runtime,
                replace) -> local_runner.LocalMPIJobRunner | None:
    """The runner for the job in ``file``, every input checked first; None (after one
    ``error:`` line) when no Docker engine answers.

    Raises:
        ValueError: see :func:`run_local`.
    """
    import docker

    job, runtime_obj = load_job(file, runtime)
    if not image and (missing := missing_images(job, runtime_obj)):
        raise ValueError(f"{file}: container {missing[0]} has no image (the API server "
                         "would refuse its pods: spec.containers[0].image: Required value); "
                         "set image in the file or pass --image")
    try:
        runner = local_runner.LocalMPIJobRunner(
            job, runtime=runtime_obj, pvc_dirs=dict(pvc or {}), image=image,
            ready_timeout_s=ready_timeout_s, on_status=_status_printer())
    except docker.errors.DockerException as e:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        print(f"error: no Docker engine answers at {host} (DOCKER_HOST): start one or set "
              f"DOCKER_HOST ({str(e).splitlines()[0][:160]})", file=sys.stderr)
        return None
    if not replace and (runner.containers() or runner.jc.networks()):
        raise ValueError(f"containers or network of {runner.plan.kind} {runner.key} exist "
                         "already (an earlier run left them, or one is running): pass "
                         "--replace to delete them first")
    return runner


def _interrupted(runner: local_runner.LocalMPIJobRunner, signum: int) -> int:
    """Remove the job after SIGINT/SIGTERM, say so in one line; ``128 + signum``."""
    # a create sent before the signal may land after a first clean-up: clean twice
    runner.delete()
    runner.delete()
    left = runner.containers() + runner.jc.networks()
    print(f"interrupted ({signal.Signals(signum).name}): {runner.plan.kind} "
          f"{runner.key} containers and network removed"
          + (f"; {len(left)} left, remove them with docker rm -f" if left else "")
          + "; kept nothing", file=sys.stderr)
    return 128 + signum


def run_local(file: str | Path, *, pvc: Mapping[str, str] | None = None,
              image: str | None = None,
              replace: bool = False, keep: bool = False, ready_timeout_s: float = 120.0,
              runtime: str | Path | None = None) -> int:
    """Run the MPIJob (or TrainJob) in ``file`` as local containers; print Launcher output
    and status.

    Args:
        file: YAML/JSON with a ``kubeflow.org/v2beta1`` MPIJob (``kfp-gpu`` writes one with
            ``mpijob.to_yaml``) or a ``trainer.kubeflow.org/v1alpha1`` TrainJob
            (``trainjob.to_yaml``).
        pvc: claim -> the local folder standing in for that PVC (``--pvc CLAIM=DIR``,
            parsed by :func:`parse_pvc`).
        image: replace every pod template's image (e.g. a locally built tag).
        replace: delete what an earlier run of the same job left first.
        keep: leave containers, network and workspace in place afterwards (inspect them
            with ``docker ps -a --filter label=kfp-gpu.local-mpijob``).
        ready_timeout_s: seconds the Workers get to run and listen.
        runtime: for a TrainJob, the YAML/JSON file with the runtime it references
            (default :data:`DEFAULT_RUNTIME_FILE`).

    Returns:
        0 if the MPIJob Succeeded (TrainJob: Complete), 1 if it Failed, 130 after SIGINT
        and 143 after SIGTERM (every container and the network of the job removed first,
        ``--keep`` or not; one ``interrupted`` line), 3 when no Docker engine answers, 2
        when the image is not in the engine (one ``error:`` line each).

    Raises:
        ValueError: missing or unreadable file, no job in it, a field its CRD does not
            declare (:mod:`kfp_gpu.mpi.local.fields`), a container without an image,
            unsupported volume kinds, no runtime.
    """
    import docker
    import requests

    runner = _runner_for(file, pvc, image, ready_timeout_s, runtime, replace)
    if runner is None:
        return EXIT_UNREACHABLE
    got: list[int] = []

    def cancel(signum, frame):
        # the first SIGTERM/SIGINT stops the job; later ones wait for the clean-up
        if not got:
            got.append(signum)
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, cancel) for s in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    follower = threading.Thread(target=_follow_launcher, args=(runner, stop), daemon=True)
    try:
        if replace:
            runner.delete()
        runner.start()
        follower.start()
        runner.wait()
    except KeyboardInterrupt:
        got[:1] = got[:1] or [signal.SIGINT]
        stop.set()
        return _interrupted(runner, got[0])
    except docker.errors.ImageNotFound as e:
        print(f"error: image not in the Docker engine: {e.explanation or e}; build or pull "
              "it, or pass --image", file=sys.stderr)
        return 2
    except requests.exceptions.ConnectionError as e:  # the engine went away midway
        print(f"error: lost the Docker engine: {str(e).splitlines()[0][:200]}",
              file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        stop.set()
        if got or not keep:
            runner.delete()
        for s, h in previous.items():
            signal.signal(s, h)
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
    try:
        return run_local(a.file, pvc=parse_pvc(a.pvc), image=a.image, replace=a.replace,
                         keep=a.keep, ready_timeout_s=a.ready_timeout, runtime=a.runtime)
    except ValueError as e:  # input errors: one line, exit 2 (as the kfp-gpu command)
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
