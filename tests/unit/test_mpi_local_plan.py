"""The local MPIJob runner's pure parts: plan (MPIJob -> containers), status, ssh key.

Expected values are the ones kubeflow/mpi-operator v0.8.2 (pkg/controller/
mpi_job_controller.go, mpi_job_controller_status.go) produces for the same MPIJob; the
Docker side is tested for real in tests/containers/test_local_mpijob.py.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import stat
import tempfile

import pytest

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.local import status as local_status
from kfp_gpu.mpi.local import workspace as lw
from kfp_gpu.mpi.spec import mpijob, ssh
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.support.mpijob_options import SETTINGS


def built(**kw) -> dict:
    return mpijob.build(MPIJobOptions.from_settings(**{**SETTINGS, **kw}))


def test_plan_of_the_builders_mpijob():
    job = built()
    p = lp.plan(job)
    assert p.network == "kfp-gpu-ml-resnet-ab12"
    assert [w.name for w in p.workers] == [f"resnet-ab12-worker-{i}" for i in range(3)]
    assert p.launcher.name == "resnet-ab12-launcher"
    # newConfigMap: FQDN without cluster domain, slots = slotsPerWorker (2 GPUs per pod)
    assert p.hostfile == "".join(f"resnet-ab12-worker-{i}.resnet-ab12.ml.svc slots=2\n"
                                 for i in range(3))
    w0 = p.workers[0]
    assert w0.aliases == ("resnet-ab12-worker-0", "resnet-ab12-worker-0.resnet-ab12",
                          "resnet-ab12-worker-0.resnet-ab12.ml",
                          "resnet-ab12-worker-0.resnet-ab12.ml.svc",
                          "resnet-ab12-worker-0.resnet-ab12.ml.svc.cluster.local")
    assert w0.dns_search[-1] == "resnet-ab12.ml.svc.cluster.local"  # newWorker's search
    assert "resnet-ab12.ml.svc.cluster.local" not in p.launcher.dns_search
    # the builder's own non-root sshd command is honoured, not replaced
    assert w0.entrypoint == tuple(ssh.DEFAULT_WORKER_COMMAND) and w0.command is None
    tmpl = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert p.launcher.entrypoint == tuple(tmpl["command"])
    # non-root Workers get no IPC_LOCK (mpijob.worker_may_run_as_root); root ones do
    assert w0.security == lp.Security(user="1000:1000", group_add=("1000",), cap_add=())
    assert p.launcher.security.user == "1000:1000" and p.launcher.security.cap_add == ()
    root = lp.plan(built(run_as_user=0, run_as_group=0, fs_group=None)).workers[0]
    assert root.security.cap_add == ("IPC_LOCK",) and root.security.user == "0:0"
    assert w0.resources.shm_size == 2 * 2**30
    assert p.ssh_mount_path == "/home/mpiuser/.ssh" and p.ssh_key_mode == 0o644


def test_env_the_controller_adds():
    p = lp.plan(built())
    w, la = p.workers[1].environment, p.launcher.environment
    assert w["K_MPI_JOB_ROLE"] == "worker" and la["K_MPI_JOB_ROLE"] == "launcher"
    assert la["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    assert la["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert la["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    assert la["OMPI_MCA_orte_set_default_slots"] == "2"
    assert la["NVIDIA_VISIBLE_DEVICES"] == "" and la["NVIDIA_DRIVER_CAPABILITIES"] == ""
    assert not any(k.startswith("OMPI_MCA") for k in w)
    assert w["NCCL_DEBUG"] == "INFO"  # the template's own env is kept
    intel = lp.role_env("launcher", 4, "Intel", False)
    assert intel["I_MPI_PERHOST"] == "4" and "OMPI_MCA_orte_default_hostfile" not in intel


def test_mounts_pvcs_ssh_and_config():
    p = lp.plan(built())
    w = {m.target: m for m in p.workers[0].mounts}
    assert w["/mnt/shared"] == lp.Mount("pvc", "shared", "/mnt/shared")
    assert w["/data"] == lp.Mount("pvc", "data", "/data", True, "fm")
    assert w["/home/mpiuser/.ssh"] == lp.Mount("ssh", "ssh", "/home/mpiuser/.ssh", True)
    assert "/etc/mpi" not in w and "/dev/shm" not in w  # config: Launcher only; shm: shm_size
    la = {m.target: m for m in p.launcher.mounts}
    assert set(la) == {"/home/mpiuser/.ssh", "/etc/mpi"}
    assert la["/etc/mpi"].read_only


def test_dropped_resources_are_noted():
    p = lp.plan(built())
    text = "\n".join(p.notes)
    assert "resnet-ab12-worker-0: resources nvidia.com/gpu, rdma/rdma_shared_device_a" in text
    assert "resnet-ab12-launcher: resources cpu, memory dropped" in text


def test_default_worker_command_and_root_ssh():
    job = built(volumes=(), fs_group=None, ssh=ssh.ROOT_SSH)
    c = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    del c["command"]
    p = lp.plan(job)
    assert p.workers[0].entrypoint == ("/usr/sbin/sshd", "-De")  # newWorker's default
    assert p.workers[0].security.user is None
    assert p.ssh_key_mode == 0o600 and p.ssh_mount_path == "/root/.ssh"  # setupSSHOnPod


def test_defaults_of_a_bare_mpijob():
    job = built()
    for key in ("slotsPerWorker", "launcherCreationPolicy", "sshAuthMountPath", "runPolicy"):
        del job["spec"][key]
    del job["metadata"]["namespace"]
    p = lp.plan(job)
    assert p.namespace == "default" and p.hostfile.splitlines()[0].endswith(
        ".resnet-ab12.default.svc slots=1")
    assert p.policy == lp.RunPolicy(clean_pod_policy="None", backoff_limit=6,
                                    launcher_creation_policy="AtStartup")
    assert p.ssh_mount_path == "/root/.ssh"


def test_hostfile_forms_and_discover_hosts():
    assert lp.hostfile("j", "ns", 2, 3, "MPICH") == "j-worker-0.j.ns.svc:3\nj-worker-1.j.ns.svc:3\n"
    assert lp.hostfile("j", "ns", 1, 1, launcher_as_worker=True).splitlines()[0] == (
        "j-launcher.j.ns.svc slots=1")
    assert lp.discover_hosts("j", "ns", ["j-worker-1", "j-worker-0"]) == (
        "#!/bin/sh\necho j-worker-0.j.ns.svc\necho j-worker-1.j.ns.svc\n")
    with pytest.raises(ValueError, match="accepted: 'OpenMPI', 'Intel', 'MPICH'"):
        lp.hostfile("j", "ns", 1, 1, "LAM")


def test_volumes_env_valuefrom_and_errors():
    job = built(volumes=())
    spec = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    c = spec["containers"][0]
    spec["volumes"] += [{"name": "scratch", "emptyDir": {}},
                        {"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                        {"name": "host", "hostPath": {"path": "/srv/x"}}]
    c["volumeMounts"] += [{"name": "scratch", "mountPath": "/scratch"},
                          {"name": "ram", "mountPath": "/ram"},
                          {"name": "host", "mountPath": "/x", "readOnly": True}]
    c["env"] += [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                 {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    p = lp.plan(job)
    w = {m.target: m for m in p.workers[1].mounts}
    assert w["/scratch"] == lp.Mount("emptyDir", "resnet-ab12-worker-1/scratch", "/scratch")
    assert w["/ram"] == lp.Mount("tmpfs", str(64 * 2**20), "/ram")
    assert w["/x"] == lp.Mount("hostPath", "/srv/x", "/x", True)
    assert p.workers[1].environment["POD"] == "resnet-ab12-worker-1"
    assert "IP" not in p.workers[1].environment
    assert any("env IP (valueFrom) dropped" in n for n in p.notes)
    bad = copy.deepcopy(job)
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"].append(
        {"name": "cfg", "configMap": {"name": "x"}})
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "volumeMounts"].append({"name": "cfg", "mountPath": "/cfg"})
    with pytest.raises(ValueError, match="accepted: emptyDir, hostPath, persistentVolumeClaim"):
        lp.plan(bad)
    with pytest.raises(ValueError, match="not a kubeflow.org/v2beta1 MPIJob"):
        lp.plan({**job, "apiVersion": "kubeflow.org/v1"})
    with pytest.raises(ValueError, match="accepted suffixes|accepted are numbers"):
        lp.quantity_bytes("2 GB")
    assert lp.quantity_bytes("1.5Gi") == 3 * 2**29 and lp.quantity_bytes("500M") == 5 * 10**8


def test_status_follows_set_condition_rules():
    s = local_status.JobStatus("j", "ns")
    s.created()
    s.running()
    assert s.set("Running") is False  # unchanged type/status/reason: not re-written
    s.failed("WorkerFailed/Error", "worker j-worker-1 exited with code 3 (Error)")
    d = s.to_dict()
    types = {c["type"]: c for c in d["conditions"]}
    assert types["Created"]["reason"] == "MPIJobCreated"
    assert types["Created"]["message"] == "MPIJob ns/j is created."
    assert types["Running"]["status"] == "False"  # a terminal condition flips Running
    assert types["Failed"] == {**types["Failed"], "status": "True",
                               "reason": "WorkerFailed/Error"}
    assert s.finished() and "completionTime" in d and "startTime" in d
    s2 = local_status.JobStatus("j", "ns")
    s2.succeeded()
    assert s2.condition("Succeeded")["message"] == "MPIJob ns/j successfully completed."
    assert local_status.container_reason(137, oom_killed=True) == "OOMKilled"
    assert local_status.container_reason(0) == "Completed"
    assert local_status.container_reason(3) == "Error"


def test_ssh_key_pair_is_ecdsa_p521_as_new_ssh_auth_secret():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private, public = local_runner.ssh_key_pair()
    assert private.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    key = serialization.load_pem_private_key(private, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp521r1"
    assert public.startswith(b"ecdsa-sha2-nistp521 ") and public.endswith(b"\n")
    again = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                          serialization.PublicFormat.OpenSSH)
    assert public.strip() == again
    assert local_runner.ssh_key_pair()[1] != public  # a fresh key per job


def test_listening_reads_proc_net_tcp():
    head = "  sl  local_address rem_address   st tx_queue rx_queue\n"
    assert local_runner.listening(head + "   0: 00000000:08AE 00000000:0000 0A 0:0\n")
    assert not local_runner.listening(head + "   0: 0100007F:08AE 0200007F:A000 01 0:0\n")
    assert not local_runner.listening(head)


SSH_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")


def test_ssh_secret_modes_and_group_as_kubelet_gives_them():
    """setupSSHOnPod's defaultMode (0600 only for /root/.ssh, else the Secret volume default
    0644) and, with a pod fsGroup, kubelet's group and group read (kubernetes
    pkg/volume/volume_linux.go changeFilePermission: mode | 0440): root's key is 0640
    under an fsGroup; every file is root's."""
    root = lp.plan(built(ssh=dataclasses.replace(ssh.ROOT_SSH, fs_group=1000)))
    assert root.ssh == lp.SshSecret("/root/.ssh", 0o600, gid=1000)
    assert lw.secret_file_stats(root, 0) == {n: (0o640, 0, 1000) for n in SSH_FILES}
    assert lp.plan(built()).ssh.gid == 1000  # the builder's fs_group=1000 (SETTINGS)
    assert lw.secret_file_stats(lp.plan(built()), 0) == {n: (0o644, 0, 1000) for n in SSH_FILES}
    plain = lp.plan(built(fs_group=None))
    assert plain.ssh.gid is None
    assert lw.secret_file_stats(plain, 0) == {n: (0o644, 0, 0) for n in SSH_FILES}
    assert lw.secret_file_mode(0o600, None) == 0o600 and lw.secret_file_mode(0o755, 5) == 0o755
    # Launcher and Workers with different fsGroups: the Workers' group, with a note
    job = built()
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["securityContext"][
        "fsGroup"] = 2000
    split = lp.plan(job)
    assert split.ssh.gid == 1000 and any("fsGroup is 2000" in n for n in split.notes)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to root needs root")
def test_workspace_files_are_roots_with_the_pods_fs_group(tmp_path, monkeypatch):
    """What the containers see: root-owned Secret and ConfigMap files (kubelet writes them),
    group fsGroup and 0640 for root's key; not the caller's uid."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    chowned = []
    real_chown = os.chown
    monkeypatch.setattr(os, "chown", lambda p, u, g: (chowned.append(u), real_chown(p, u, g)))
    ws = lw.write_workspace(lp.plan(built(ssh=dataclasses.replace(ssh.ROOT_SSH,
                                                                  fs_group=1000))))
    files = {p.name: (stat.S_IMODE(p.stat().st_mode), p.stat().st_uid, p.stat().st_gid)
             for p in (ws / "ssh").iterdir()}
    assert files == {n: (0o640, 0, 1000) for n in SSH_FILES}
    hostfile = (ws / "config" / lp.HOSTFILE).stat()
    assert (stat.S_IMODE(hostfile.st_mode), hostfile.st_uid, hostfile.st_gid) == (0o444, 0, 0)
    assert chowned and set(chowned) == {0}  # given to root, not left as the caller's


def test_non_root_caller_keeps_the_files_but_ssh_can_use_them(tmp_path, monkeypatch):
    """A caller that is not root cannot chown to root. When a container
    runs as the caller's uid, the files are 0600 (ssh and sshd refuse a key their own user
    owns that others can read: openssh-portable authfile.c sshkey_perm_ok); when none does,
    kubelet's modes; when another container runs as a second non-root uid, a clear error."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: ssh.MPI_USER_ID)
    calls = []
    monkeypatch.setattr(os, "chown", lambda p, u, g: calls.append((u, g)))
    p = lp.plan(built())  # Launcher and Workers run as uid 1000, fsGroup 1000
    assert lw.secret_file_stats(p, 1000) == {n: (0o600, None, 1000) for n in SSH_FILES}
    ws = lw.write_workspace(p)
    assert {stat.S_IMODE(f.stat().st_mode) for f in (ws / "ssh").iterdir()} == {0o600}
    assert calls and all(u == -1 for u, _ in calls)  # never chown to root
    assert lw.secret_file_stats(p, 4242) == {n: (0o644, None, 1000) for n in SSH_FILES}
    job = built()
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["securityContext"][
        "runAsUser"] = 1001
    with pytest.raises(PermissionError, match="uid 1001.*run the local runner as root"):
        lw.write_workspace(lp.plan(job))
    assert [d.name for d in tmp_path.iterdir()] == [ws.name]  # nothing left by the refusal


@pytest.mark.parametrize("resources,shares", [
    ({}, 2),                                              # no request: MinShares
    ({"requests": {"cpu": "1"}}, 1024),
    ({"requests": {"cpu": "500m"}}, 512),
    ({"requests": {"cpu": "1m"}}, 2),                     # 1 * 1024 // 1000 = 1 -> MinShares
    ({"limits": {"cpu": "2"}}, 2048),                     # request defaults to the limit
    ({"requests": {"cpu": "250m"}, "limits": {"cpu": "4"}}, 256),
])
def test_cpu_shares_as_the_kubelet_sets_them(resources, shares):
    """kubernetes pkg/kubelet/cm/helpers_linux.go MilliCPUToShares: a Worker without a CPU
    request gets the lowest CFS weight, so on a small machine the ranks cannot starve the
    component's own container (the cancel path's DELETE must go out within a second)."""
    from kfp_gpu.mpi.local import plan as lp

    assert lp.cpu_shares({"resources": resources}) == shares


def test_planned_containers_carry_the_cpu_shares():
    from kfp_gpu.mpi.local import plan as lp
    from kfp_gpu.mpi.spec import mpijob
    from kfp_gpu.mpi.spec.options import MPIJobOptions

    job = mpijob.build(MPIJobOptions.from_settings(
        name="shares", namespace="ci", image="img", program=("true",), workers=2))
    plan = lp.plan(job)
    assert [w.resources.cpu_shares for w in plan.workers] == [2, 2]
    assert plan.launcher.resources.cpu_shares == 512  # the builder's launcher_cpu 500m
    with pytest.raises(ValueError, match="invalid cpu quantity 'lots'"):
        lp.cpu_shares({"resources": {"requests": {"cpu": "lots"}}})
