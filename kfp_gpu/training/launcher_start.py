"""Entry of the MPIJob Launcher: wait until every Worker's sshd answers, then exec mpirun.

``python -m kfp_gpu.training.launcher_start [--port 2222] [--timeout 1800] -- mpirun ...``

Every MPIJob the suite builds starts its Launcher here
(:func:`kfp_gpu.mpi.spec.mpijob.launcher_command`). A job Kueue admits
(``runPolicy.suspend`` true -> false) gets its Launcher Job while it is suspended, before
any Worker exists (kubeflow/mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go``
``syncHandler``; kubeflow/mpi-operator issue 615), so on admission the
Launcher starts together with Workers that may still be pulling a multi-GB image; mpirun's
first ssh would then fail and, with ``backoffLimit`` 0, fail the job. This module reads the
hostfile the operator mounts (``OMPI_MCA_orte_default_hostfile``, set by the operator to
``/etc/mpi/hostfile``: ``<host> slots=<n>`` per line), connects to each host's sshd port
until all accept (a Worker's name resolves only once its pod is Ready: the operator's
headless Service publishes ready addresses only, ``newJobService`` with
``PublishNotReadyAddresses`` false unless ``runLauncherAsWorker``; the Workers' readiness
probe is sshd's port, :func:`kfp_gpu.mpi.spec.mpijob.sshd_readiness_probe`), and then
replaces itself with the command, which keeps the Launcher's signals and exit code.

A TrainJob's launcher is also a rank host: Kubeflow Trainer v2.3.0 writes the launcher's
own endpoint into the hostfile when the runtime has ``runLauncherAsNode``
(``pkg/runtime/framework/plugins/mpi/mpi.go`` ``buildHostFileConfigMap``; on
``kfp-gpu-horovod``, manifests/trainer). Its own name runs no sshd, but mpirun must still
resolve it to see that the host is local (``OMPI_MCA_orte_keep_fqdn_hostnames``, set by the
same plugin, keeps the FQDN); the JobSet headless Service publishes it only once the
endpoints controller and the cluster DNS have caught up (sigs.k8s.io/jobset v0.12.0
``pkg/controllers/jobset_controller.go``, ``PublishNotReadyAddresses`` true). On a real node
under load mpirun started first and failed ``ssh: Could not resolve hostname
<job>-launcher-0-0.<job>``. So the host's own name (first label equal to this pod's host
name) is waited for until it resolves; every other host until its sshd answers.

Exit code 1 with one line naming the hosts that never answered within ``--timeout``.

Before the exec, the mpirun line loses each ``-x NAME`` this pod's environment does not set
(:func:`forward_set_only`): an optional Secret key the Secret lacks
(``secretKeyRef.optional``) leaves its variable unset, and Open MPI would print one warning
per such name at the top of the Launcher's log.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: Executable names :func:`forward_set_only` takes for mpirun.
MPIRUN_NAMES = ("mpirun", "mpiexec", "mpiexec.hydra")
#: The options :func:`kfp_gpu.mpi.spec.mpirun.mpirun_command` writes before the program ->
#: how many values follow each (Open MPI ``mpirun(1)``; Intel MPI / MPICH ``-n``,
#: ``-genvlist``).
MPIRUN_OPTIONS = {"--allow-run-as-root": 0, "--oversubscribe": 0, "-np": 1, "-n": 1,
                  "-bind-to": 1, "-map-by": 1, "-x": 1, "-genvlist": 1, "-mca": 2}
#: Where mpi-operator mounts the hostfile (``configMountPath`` + ``hostfileName``).
DEFAULT_HOSTFILE = "/etc/mpi/hostfile"
HOSTFILE_ENV = "OMPI_MCA_orte_default_hostfile"


def hosts(text: str) -> list[str]:
    """Host names of a hostfile (first word of each non-comment line), in order."""
    out = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words and words[0] not in out:
            out.append(words[0])
    return out


def answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """True if a TCP connection to ``host:port`` is accepted within ``timeout_s``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def resolves(host: str) -> bool:
    """True if ``host`` resolves to an address (the cluster DNS publishes it)."""
    try:
        return bool(socket.getaddrinfo(host, None))
    except OSError:
        return False


def is_own(host: str, hostname: str) -> bool:
    """True if hostfile entry ``host`` names this pod: its first DNS label equals the first
    label of ``hostname`` (a pod's host name is its name's first label; the hostfile adds
    the subdomain, e.g. ``job-launcher-0-0.job``)."""
    return bool(hostname) and host.split(".", 1)[0] == hostname.split(".", 1)[0]


def wait_for(names: Sequence[str], port: int, timeout_s: float, *, poll_s: float = 2.0,
             probe: Callable[[str, int], bool] = answers,
             resolve: Callable[[str], bool] = resolves, hostname: str = "",
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Poll until every host answers on ``port`` -- the entry naming ``hostname`` itself
    (:func:`is_own`) until it only resolves; returns the hosts still silent after
    ``timeout_s`` seconds ([] = all answered)."""
    def ready(h: str) -> bool:
        return resolve(h) if is_own(h, hostname) else probe(h, port)

    waiting = list(names)
    end = clock() + timeout_s
    while waiting:
        waiting = [h for h in waiting if not ready(h)]
        if not waiting or clock() >= end:
            break
        sleep(poll_s)
    return waiting


def forward_set_only(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """``argv`` without the forwarded variables that ``environ`` does not set.

    ``argv`` holds one :func:`kfp_gpu.mpi.spec.mpirun.mpirun_command` line, possibly after
    a prefix (e.g. ``python -m kfp_gpu.training.worker_start``): its mpirun is the first word
    named one of :data:`MPIRUN_NAMES`, its options those of :data:`MPIRUN_OPTIONS` up to the
    program. Each ``-x NAME`` whose NAME is not in ``environ`` is dropped, and such names
    are dropped from ``-genvlist`` (the option too when none is left); ``-x NAME=VALUE``,
    the other options, the prefix and the program stay as they are. Without an mpirun word
    ``argv`` is returned unchanged.
    """
    argv = list(argv)
    start = next((i for i, word in enumerate(argv)
                  if Path(word).name in MPIRUN_NAMES), None)
    if start is None:
        return argv
    out, i = argv[:start + 1], start + 1
    while i < len(argv) and argv[i] in MPIRUN_OPTIONS:
        option, values = argv[i], argv[i + 1:i + 1 + MPIRUN_OPTIONS[argv[i]]]
        i += 1 + len(values)
        if option == "-x" and values and "=" not in values[0] and values[0] not in environ:
            continue
        if option == "-genvlist" and values:
            kept = [n for n in values[0].split(",") if n in environ]
            if not kept:
                continue
            values = [",".join(kept)]
        out += [option, *values]
    return out + argv[i:]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``[--port P] [--timeout S] [--hostfile F] -- command...``; wait; exec."""
    parser = argparse.ArgumentParser(prog="python -m kfp_gpu.training.launcher_start")
    parser.add_argument("--port", type=int, default=2222)
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds to wait for every Worker's sshd (default 1800)")
    parser.add_argument("--hostfile", default=os.environ.get(HOSTFILE_ENV, DEFAULT_HOSTFILE))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    try:
        names = hosts(Path(args.hostfile).read_text())
    except OSError as e:
        print(f"launcher_start: cannot read the hostfile {args.hostfile}: {e.strerror}",
              file=sys.stderr)
        return 1
    t0 = time.monotonic()
    me = socket.gethostname()
    silent = wait_for(names, args.port, args.timeout, hostname=me)
    own = [h for h in names if is_own(h, me)]
    if silent:
        mine = [h for h in silent if h in own]
        others = [h for h in silent if h not in own]
        if others:
            print(f"launcher_start: no sshd on port {args.port} of {', '.join(others)} after "
                  f"{args.timeout:g} s; the Workers did not start (see their pods' events)",
                  file=sys.stderr)
        if mine:
            print(f"launcher_start: this host's name {mine[0]} does not resolve after "
                  f"{args.timeout:g} s; the cluster DNS does not publish the job's headless "
                  "Service (see the Service and the DNS pods)", file=sys.stderr)
        return 1
    mine = f", this host's name {own[0]} resolves," if own else ""
    print(f"launcher_start: {len(names) - len(own)} Worker(s) answer on port {args.port}"
          f"{mine} after {time.monotonic() - t0:.0f} s", flush=True)
    command = forward_set_only(command, os.environ)
    os.execvp(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
