"""SSH between Launcher and Workers, and the user the pods run as (:class:`SshOptions`).

Defaults follow the project's non-root ``horovod`` image (``images/horovod/Dockerfile``),
which follows the MPI Operator's non-root base image (kubeflow/mpi-operator
``build/base/Dockerfile`` and ``examples/v2beta1/pi``): user ``mpiuser`` (uid/gid 1000),
``sshAuthMountPath: /home/mpiuser/.ssh``, sshd on port 2222 with its own config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kfp_gpu.mpi.spec.checks import argv, optional_non_negative

#: The non-root user of the horovod image and of the MPI Operator's base images.
MPI_USER = "mpiuser"
MPI_USER_ID = 1000
MPI_USER_HOME = "/home/mpiuser"
#: sshd port of the non-root image (a non-root sshd cannot bind 22 without a capability).
SSH_PORT = 2222
#: Where the operator mounts the SSH Secret (id_rsa, authorized_keys) for ``mpiuser``.
DEFAULT_SSH_AUTH_MOUNT_PATH = f"{MPI_USER_HOME}/.ssh"
#: sshd in the foreground with the user's own config (PidFile and HostKey under the home
#: directory, ``Port 2222``), as in kubeflow/mpi-operator's pi example.
SSHD_COMMAND = ("/usr/sbin/sshd", "-De", "-f", f"{MPI_USER_HOME}/.sshd_config")
#: The horovod image's Python (its virtualenv, images/horovod/Dockerfile ``/opt/venv``).
IMAGE_PYTHON = "/opt/venv/bin/python"
#: Module that starts a Worker: RDMA memlock check, device-plugin env handed to the ranks
#: (:mod:`kfp_gpu.training.worker_start`), then exec of the rest of the command.
WORKER_START = ("-m", "kfp_gpu.training.worker_start")
#: Worker command: :data:`SSHD_COMMAND` started through :data:`WORKER_START`, so ranks that
#: sshd starts (with a fresh environment) still see the device plugin's env (HAMi limits,
#: ``NVIDIA_VISIBLE_DEVICES``) and an RDMA Worker with a too small memlock limit fails at
#: once with the fix.
DEFAULT_WORKER_COMMAND = (IMAGE_PYTHON, *WORKER_START, *SSHD_COMMAND)


@dataclass(frozen=True)
class SshOptions:
    """The user the pods run as and how the Launcher reaches the Workers over SSH.

    Defaults fit the project's non-root ``horovod`` image (user ``mpiuser``, uid/gid 1000,
    sshd on port 2222 with its own config); :data:`ROOT_SSH` fits a root image.

    Attributes:
        worker_command: command of the Worker container (``sshd`` in the foreground).
        ssh_auth_mount_path: where the operator mounts the SSH keys (the ``.ssh`` of the
            user the pods run as).
        run_as_user / run_as_group: pod ``securityContext.runAsUser``/``runAsGroup`` of
            Launcher and Workers (``None`` = the image's user); they must match
            ``ssh_auth_mount_path``'s owner's home.
        fs_group: pod ``securityContext.fsGroup`` (e.g. 1000 so a shared PVC the Workers
            write to is group-writable for ``mpiuser``); ``None`` = unset.
    """

    worker_command: Sequence[str] = DEFAULT_WORKER_COMMAND
    ssh_auth_mount_path: str = DEFAULT_SSH_AUTH_MOUNT_PATH
    run_as_user: int | None = MPI_USER_ID
    run_as_group: int | None = MPI_USER_ID
    fs_group: int | None = None

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        if not self.ssh_auth_mount_path.startswith("/"):
            raise ValueError("ssh_auth_mount_path must be an absolute path")
        argv("worker_command", self.worker_command, list(DEFAULT_WORKER_COMMAND))
        for key in ("run_as_user", "run_as_group", "fs_group"):
            optional_non_negative(key, getattr(self, key), "integer (uid/gid)")

    def pod_security_context(self) -> dict:
        """PodSecurityContext (``runAsUser``, ``runAsGroup``, ``fsGroup``) of Launcher and
        Workers; empty when all three are ``None``.

        ``IPC_LOCK`` (added with RDMA to Workers that may run as root) only reaches the
        effective capabilities of a root process: Kubernetes sets no ambient capabilities,
        so for a non-root rank the memory it can register for RDMA is bounded by
        ``RLIMIT_MEMLOCK`` (``ulimit -l``) that the container runtime gives the pod (see
        docs/distributed.md).
        """
        pairs = (("runAsUser", self.run_as_user), ("runAsGroup", self.run_as_group),
                 ("fsGroup", self.fs_group))
        out = {key: value for key, value in pairs if value is not None}
        if self.fs_group is not None:
            # Chown a volume only when its root does not match already: a large shared PVC
            # is not walked file by file at every pod start (Kubernetes >= 1.23 GA).
            out["fsGroupChangePolicy"] = "OnRootMismatch"
        return out


#: SSH options for an image whose sshd runs as root (``/root/.ssh``, system config); the
#: image needs kfp-gpu installed for ``python3`` on its PATH (the ranks import it anyway).
#: The project's horovod image runs as ``mpiuser``: with it, also set ``run_as_user=0,
#: run_as_group=0`` (``dataclasses.replace``). With ``fs_group`` kubelet makes root's key
#: 0640 (the operator's 0600 plus group read), which ssh ignores for its own user's key;
#: the horovod image's ``/usr/local/bin/ssh`` hands ssh an owner-only copy
#: (images/horovod/ssh-wrapper.sh; tests/containers/test_worker_ssh.py).
ROOT_SSH = SshOptions(worker_command=("python3", *WORKER_START, "/usr/sbin/sshd", "-De"),
                      ssh_auth_mount_path="/root/.ssh", run_as_user=None, run_as_group=None)
