"""The horovod image's sshd and ssh files as a real cluster gives them.

- No capabilities: the Worker's default command
  (:data:`kfp_gpu.mpi.spec.ssh.DEFAULT_WORKER_COMMAND`) in a container that drops ALL capabilities with no-new-privileges, as uid 1000 (what Pod
  Security "restricted" asks of a pod): sshd starts, listens on 2222 and takes a login with
  the operator's key, holding no capability. With file capabilities on sshd (the image
  before this change: ``setcap CAP_NET_BIND_SERVICE=+eip``) the exec fails with EPERM.
- Root Workers: ``ROOT_SSH`` (root Workers, ``/root/.ssh``) with a pod ``fsGroup``: kubelet makes
  root's key 0640 (mpi-operator's defaultMode 0600 | kubelet's group read), which ssh
  ignores; mpirun across 2 Workers still succeeds (the image's ssh wrapper).
- Bare ranks: an MPIJob in the shape of mpi-operator's own examples (``examples/v2beta1/pi/
  pi.yaml``: Launcher ``mpirun`` with no ``-x``, Workers ``/usr/sbin/sshd -De -f
  /home/mpiuser/.sshd_config``, uid 1000) running a bare ``python3`` over 2 Workers x
  slotsPerWorker 2: each of the 4 ranks imports mpi4py and horovod.tensorflow from the
  image's virtualenv.
- Not root: the local runner's fallback for a caller that is not root (files its own, 0600
  when a container runs as its uid) is what sshd accepts; kubelet's 0644 on a file that
  sshd's own user owns is refused.

Needs a Docker engine and the horovod image (skips without them; fails under CI).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from kfp_gpu.mpi.local import workspace as lw
from kfp_gpu.mpi.spec import mpijob, ssh
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.containers import local_jobs
from tests.containers.engine import LABEL, unique

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

SSH_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")
#: Every file of the image that carries file capabilities (the ``security.capability``
#: extended attribute that ``setcap`` writes), as ``path`` lines.
FILE_CAPS = """
import os
for top in ("/usr", "/opt", "/bin", "/sbin", "/lib", "/home", "/etc"):
    for root, _, names in os.walk(top):
        for n in names:
            p = os.path.join(root, n)
            try:
                os.getxattr(p, "security.capability", follow_symlinks=False)
            except OSError:
                continue
            print("FILECAP", p)
print("scanned")
"""


def kubelet_ssh_dir(where: Path, mode: int = 0o644, gid: int = 0, uid: int = 0) -> Path:
    """The operator's ssh Secret as kubelet writes it: a fresh key pair, files owned by root
    (``uid``), group ``gid``, ``mode`` (mpi-operator v0.8.2 setupSSHOnPod: 0644 off
    /root/.ssh)."""
    where.mkdir(mode=0o755)
    private, public = lw.ssh_key_pair()
    for name, data in zip(SSH_FILES, (private, public, public), strict=True):
        lw.write(where / name, data, mode, uid, gid)
    return where


def wait_for_login(container, user: str, timeout_s: float = 30) -> str:
    """Output of ``ssh localhost`` in ``container`` as ``user`` once sshd takes the login."""
    cmd = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "localhost",
           ('echo "PATH=$PATH"; python3 -c "import sys, mpi4py, horovod; print(\'PREFIX\', '
            'sys.prefix)"')]
    deadline, out = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        container.reload()
        if container.status == "exited":
            break
        code, raw = container.exec_run(cmd, user=user)
        out = raw.decode("utf-8", "replace")
        if code == 0:
            return out
        time.sleep(1)
    logs = container.logs().decode("utf-8", "replace")
    raise AssertionError(f"no ssh login: {out}\ncontainer {container.status}: {logs}")


def test_worker_sshd_runs_with_all_capabilities_dropped(docker_engine, horovod_image,
                                                        tmp_path):
    """The Worker's command under cap_drop ALL + no-new-privileges as uid
    1000; sshd (PID 1 after worker_start's exec) holds no capability and takes a login."""
    if os.geteuid() != 0:
        pytest.skip("writing root-owned Secret files needs root")
    keys = kubelet_ssh_dir(tmp_path / "ssh")
    worker = docker_engine.containers.run(
        horovod_image, list(ssh.DEFAULT_WORKER_COMMAND), detach=True,
        user=f"{ssh.MPI_USER_ID}:{ssh.MPI_USER_ID}", cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        volumes={str(keys): {"bind": ssh.DEFAULT_SSH_AUTH_MOUNT_PATH, "mode": "ro"}},
        labels={LABEL: getattr(docker_engine, "kfp_gpu_session", "manual")})
    try:
        out = wait_for_login(worker, str(ssh.MPI_USER_ID))
        # the session sees the image's PATH and Python (the image's sshd SetEnv), not sshd's own
        assert "PATH=/opt/venv/bin:" in out and "PREFIX /opt/venv" in out, out
        code, status = worker.exec_run(["cat", "/proc/1/status", "/proc/1/cmdline"])
        text = status.decode()
        assert code == 0 and "/usr/sbin/sshd" in text, text
        caps = dict(line.split(":", 1) for line in text.splitlines() if line.startswith("Cap"))
        assert {k: int(v, 16) for k, v in caps.items()} == {
            "CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}
        assert worker.attrs["HostConfig"]["CapDrop"] == ["ALL"]
    finally:
        worker.remove(force=True)


@pytest.mark.parametrize(("mode", "works"), [(lw.OWNER_ONLY, True), (0o644, False)])
def test_ssh_files_of_a_non_root_caller_with_the_workers_uid(docker_engine, horovod_image,
                                                             tmp_path, mode, works):
    """The local runner's fallback when it is not root: files owned by
    the caller's uid, which the Worker runs as too, work at 0600 (what the runner writes
    then) and not at kubelet's 0644, which sshd refuses as a host key ("bad permissions").
    Since the image carries no host key, sshd also has the one the Worker made at start: it stays
    up and takes the login either way; the refusal shows in its log."""
    if os.geteuid() != 0:
        pytest.skip("giving files to uid 1000 needs root")
    keys = kubelet_ssh_dir(tmp_path / "ssh", mode, ssh.MPI_USER_ID, ssh.MPI_USER_ID)
    worker = docker_engine.containers.run(
        horovod_image, list(ssh.DEFAULT_WORKER_COMMAND), detach=True,
        user=f"{ssh.MPI_USER_ID}:{ssh.MPI_USER_ID}",
        volumes={str(keys): {"bind": ssh.DEFAULT_SSH_AUTH_MOUNT_PATH, "mode": "ro"}},
        labels={LABEL: getattr(docker_engine, "kfp_gpu_session", "manual")})
    try:
        assert "PREFIX /opt/venv" in wait_for_login(worker, str(ssh.MPI_USER_ID))
        logs = worker.logs().decode("utf-8", "replace")
        assert ("bad permissions" in logs) is not works, logs
    finally:
        worker.remove(force=True)


def test_no_file_in_the_image_has_file_capabilities(horovod_image, run_in):
    """Nothing the image runs relies on file capabilities, so no exec in
    the image can fail for a pod that drops them."""
    out = run_in(horovod_image, ["python3", "-c", FILE_CAPS], cap_drop=["ALL"]).check()
    assert out.splitlines()[-1] == "scanned"
    assert [ln for ln in out.splitlines() if ln.startswith("FILECAP")] == []


def test_root_ssh_with_fs_group_mpirun_across_two_workers(docker_engine, horovod_image):
    """Root Workers (``ROOT_SSH``; runAsUser 0 since the image's own user
    is mpiuser) and ``fsGroup`` 1000: root's ssh files are 0640 root:1000 as kubelet makes
    them, and mpirun reaches both Workers."""
    code = ("from mpi4py import MPI; import os, socket; c = MPI.COMM_WORLD; "
            "print(f'RANK {c.rank} {c.size} {c.allreduce(c.rank + 1)} {socket.gethostname()} "
            "{os.getuid()}\\n', end='', flush=True)")  # one write per line
    root = dataclasses.replace(ssh.ROOT_SSH, run_as_user=0, run_as_group=0, fs_group=1000)
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-rootfs"), namespace="ci", image=horovod_image,
        program=("python3", "-c", code), workers=2, ssh=root))
    expected = {n: (0o640, 0, 1000) for n in SSH_FILES}  # 0600 | 0440, group fsGroup
    status, sampler, runner = local_jobs.run_job(docker_engine, job, expected)
    workspace = runner.workspace
    try:
        logs = runner.logs("launcher")
        assert status["conditions"][-1]["type"] == "Succeeded", logs
        ranks = sorted(ln.split()[1:] for ln in logs.splitlines() if ln.startswith("RANK "))
        assert ranks == [["0", "2", "3", f"{unique('lmpi-rootfs')}-worker-0", "0"],
                         ["1", "2", "3", f"{unique('lmpi-rootfs')}-worker-1", "0"]], logs
        assert "UNPROTECTED PRIVATE KEY" not in logs and "Permission denied" not in logs
        # the ranks ran as root (sshd's privilege-separated child is user sshd's)
        assert {uid for _, uid, args in sampler.procs if "python3 -c" in args} == {0}
    finally:
        local_jobs.assert_gone(docker_engine, runner, workspace)


RANKS = ("import os, socket, sys\n"
         "from mpi4py import MPI\n"
         "import horovod.tensorflow as hvd\n"
         "hvd.init()\n"
         "print(f'RANK {hvd.rank()} {hvd.size()} {MPI.COMM_WORLD.Get_rank()} "
         "{socket.gethostname()} {os.getuid()} {sys.executable} {sys.prefix}\\n', end='')\n")


def upstream_shaped_job(image: str) -> dict:
    """mpi-operator's ``examples/v2beta1/pi/pi.yaml`` (v0.8.2) with this image, 2 Workers x
    slotsPerWorker 2 and a Launcher running ``mpirun -n 4 python3 -c RANKS``: no ``-x``,
    no absolute interpreter path; ``WaitForWorkersReady`` so the Launcher does not race
    the Workers' sshd (a v2beta1 field the example leaves at AtStartup)."""
    def pod(name: str, command: list[str], args: list[str]) -> dict:
        return {"spec": {"containers": [{
            "image": image, "name": name, "securityContext": {"runAsUser": 1000},
            "command": command, "args": args}]}}

    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": unique("lmpi-upstream"), "namespace": "ci"},
        "spec": {
            "slotsPerWorker": 2,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod(
                    "mpi-launcher", ["mpirun"], ["-n", "4", "python3", "-c", RANKS])},
                "Worker": {"replicas": 2, "template": pod(
                    "mpi-worker", ["/usr/sbin/sshd"],
                    ["-De", "-f", "/home/mpiuser/.sshd_config"])},
            }}}


def test_upstream_shaped_mpijob_with_a_bare_python3(docker_engine, horovod_image):
    """4 ranks that sshd's sessions start on 2 Workers find the image's
    Python (the virtualenv with mpi4py, Horovod, TensorFlow) as ``python3``."""
    job = upstream_shaped_job(horovod_image)
    expected = {n: (0o644, 0, 0) for n in SSH_FILES}
    status, _, runner = local_jobs.run_job(docker_engine, job, expected)
    workspace = runner.workspace
    try:
        logs = runner.logs("launcher")
        assert status["conditions"][-1]["type"] == "Succeeded", logs
        rows = sorted(ln.split()[1:] for ln in logs.splitlines() if ln.startswith("RANK "))
        assert [r[:3] for r in rows] == [[str(i), "4", str(i)] for i in range(4)], logs
        hosts = [r[3] for r in rows]
        assert sorted(hosts) == [f"{unique('lmpi-upstream')}-worker-0"] * 2 + [f"{unique('lmpi-upstream')}-worker-1"] * 2
        assert {tuple(r[4:]) for r in rows} == {
            ("1000", "/opt/venv/bin/python3", "/opt/venv")}, logs
    finally:
        local_jobs.assert_gone(docker_engine, runner, workspace)


HOST_KEY = ("from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
            "k = open('/home/mpiuser/.sshd/ssh_host_ed25519_key.pub').read().split()[1]; "
            "print(f'HOSTKEY {c.rank} {socket.gethostname()} {k}\\n', end='', flush=True)")


def test_two_workers_have_their_own_host_keys_and_mpirun_still_works(docker_engine,
                                                                      horovod_image, run_in):
    """The image carries no sshd host key (openssh-server's postinst keys
    are deleted in the build); each Worker makes its own when it starts (worker_start), so
    two Workers of one image differ, and the Launcher's mpirun reaches both (its ssh ignores
    host keys, as mpi-operator v0.8.2 build/base/Dockerfile configures ssh)."""
    out = run_in(horovod_image, ["sh", "-c", "ls /etc/ssh; ls -A /home/mpiuser/.sshd"]).check()
    assert "ssh_host_" not in out, out
    job = mpijob.build(MPIJobOptions.from_settings(
        name=unique("lmpi-hostkey"), namespace="ci", image=horovod_image,
        program=("python", "-c", HOST_KEY), workers=2))
    expected = {n: (0o644, 0, 0) for n in SSH_FILES}
    status, _, runner = local_jobs.run_job(docker_engine, job, expected)
    workspace = runner.workspace
    try:
        logs = runner.logs("launcher")
        assert status["conditions"][-1]["type"] == "Succeeded", logs
        keys = {ln.split()[2]: ln.split()[3] for ln in logs.splitlines()
                if ln.startswith("HOSTKEY ")}
        assert sorted(keys) == [f"{unique('lmpi-hostkey')}-worker-0",
                                f"{unique('lmpi-hostkey')}-worker-1"], logs
        assert len(set(keys.values())) == 2, keys
        secret = (workspace / "ssh" / "id_rsa.pub").read_text().split()[1]
        assert secret not in keys.values()
    finally:
        local_jobs.assert_gone(docker_engine, runner, workspace)
