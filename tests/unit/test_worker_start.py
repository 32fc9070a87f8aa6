"""A Worker that requests RDMA checks RLIMIT_MEMLOCK before sshd starts.

The pure judgement (:func:`memlock_problem`) with injected limits, the CapEff parser, the
device probe, and the check/entry with the process limits and ``/proc/self/status``
replaced; tests/containers/test_worker_start.py runs it for real as uid 1000.
"""

from __future__ import annotations

import resource

import pytest

from kfp_gpu.mpi.spec import mpijob, network, trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from kfp_gpu.training import worker_start as ws

INF = resource.RLIM_INFINITY
KIB = 1024
# CapEff of a root container with the runtime's default set plus IPC_LOCK (bit 14), and
# of a non-root process (Kubernetes sets no ambient capabilities).
ROOT_WITH_IPC_LOCK = "Name:\tsshd\nCapInh:\t0\nCapEff:\t00000000a80465fb\n"
NON_ROOT = "Name:\tsshd\nCapEff:\t0000000000000000\n"


@pytest.mark.parametrize(("soft", "hard", "cap", "fails"), [
    (64 * KIB, 64 * KIB, False, True),        # Docker/containerd on Linux < 5.16
    (8 * KIB * KIB, 8 * KIB * KIB, False, True),  # Linux >= 5.16 default (MLOCK_LIMIT)
    (8 * KIB * KIB, 8 * KIB * KIB, True, False),  # root with IPC_LOCK: the limit is moot
    (INF, INF, False, False),                  # --ulimit memlock=-1 / LimitMEMLOCK=infinity
    (ws.MIN_MEMLOCK_BYTES, ws.MIN_MEMLOCK_BYTES, False, False),  # the floor itself passes
    (ws.MIN_MEMLOCK_BYTES - 1, INF, False, True),  # the soft limit is the one enforced
])
def test_memlock_judgement(soft, hard, cap, fails):
    problem = ws.memlock_problem(soft, hard, cap_ipc_lock=cap)
    assert (problem is not None) == fails
    if fails:
        assert f"{soft // KIB} KiB" in problem
        for fix in ("LimitMEMLOCK=infinity", "default_ulimits", "--ulimit memlock=-1",
                    "ROOT_SSH", "rdma=False"):
            assert fix in problem


def test_memlock_minimum_must_be_positive():
    with pytest.raises(ValueError, match="positive number of bytes"):
        ws.memlock_problem(0, 0, cap_ipc_lock=False, minimum=0)


def test_cap_eff_parser():
    assert ws.has_cap_ipc_lock(ROOT_WITH_IPC_LOCK)
    assert not ws.has_cap_ipc_lock(NON_ROOT)
    # every capability but IPC_LOCK
    assert not ws.has_cap_ipc_lock(f"CapEff:\t{(1 << 41) - 1 - (1 << 14):016x}\n")
    assert not ws.has_cap_ipc_lock("Name:\tx\n")


def test_rdma_device_probe(tmp_path):
    assert ws.rdma_devices(tmp_path / "missing") == []
    (tmp_path / "rdma_cm").touch()
    assert ws.rdma_devices(tmp_path) == []
    for name in ("uverbs1", "uverbs0"):
        (tmp_path / name).touch()
    assert ws.rdma_devices(tmp_path) == ["uverbs0", "uverbs1"]


@pytest.fixture
def limits(monkeypatch):
    """The process's memlock limits, replaced: ``limits["now"] = (soft, hard)``;
    setrlimit refuses to go above the hard limit, as the kernel does without privilege."""
    state = {"now": (64 * KIB, 64 * KIB)}

    def setrlimit(which, new):
        assert which == resource.RLIMIT_MEMLOCK
        hard = state["now"][1]
        if hard != INF and (new[1] == INF or new[1] > hard):
            raise ValueError("not allowed to raise maximum limit")
        state["now"] = new

    monkeypatch.setattr(ws.resource, "getrlimit", lambda which: state["now"])
    monkeypatch.setattr(ws.resource, "setrlimit", setrlimit)
    return state


@pytest.fixture
def rdma_node(tmp_path):
    """(dev_dir with one verbs device, proc status file of a non-root process)."""
    dev = tmp_path / "infiniband"
    dev.mkdir()
    (dev / "uverbs0").touch()
    status = tmp_path / "status"
    status.write_text(NON_ROOT)
    return dev, status


def test_check_runs_only_with_rdma_requested_and_a_device(limits, rdma_node, tmp_path,
                                                          capsys):
    dev, status = rdma_node
    rdma = {ws.RDMA_ENV: "1"}
    assert ws.check_rdma_memlock({}, dev, status) is None  # RDMA not requested
    assert "KiB" in ws.check_rdma_memlock(rdma, dev, status)
    # requested but no device mounted: a warning, no failure (NCCL uses sockets)
    assert ws.check_rdma_memlock(rdma, tmp_path / "none", status) is None
    err = capsys.readouterr().err
    assert "no " in err and "uverbs* device" in err and "TCP sockets" in err
    status.write_text(ROOT_WITH_IPC_LOCK)
    assert ws.check_rdma_memlock(rdma, dev, status) is None


def test_check_raises_the_soft_limit_to_the_hard_one(limits, rdma_node):
    dev, status = rdma_node
    limits["now"] = (8 * KIB * KIB, INF)
    assert ws.check_rdma_memlock({ws.RDMA_ENV: "1"}, dev, status) is None
    assert limits["now"] == (INF, INF)  # inherited by sshd and so by every rank
    limits["now"] = (8 * KIB * KIB, 16 * KIB * KIB)
    problem = ws.check_rdma_memlock({ws.RDMA_ENV: "1"}, dev, status)
    assert "16384 KiB (hard 16384 KiB)" in problem


def test_entry_stops_before_the_command_with_the_fix(limits, rdma_node, tmp_path,
                                                     monkeypatch, capsys):
    dev, status = rdma_node
    term = tmp_path / "termination-log"
    term.touch()  # the kubelet mounts it
    monkeypatch.setattr(ws, "TERMINATION_LOG", term)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(ws.RDMA_ENV, "1")
    ran = []
    monkeypatch.setattr(ws.os, "execvp", lambda *a: ran.append(a))
    assert ws.main(["/usr/sbin/sshd", "-De"], dev_dir=dev, proc_status=status) == 1
    assert ran == [] and not (tmp_path / ".kfp_gpu_worker_env").exists()
    assert "LimitMEMLOCK=infinity" in capsys.readouterr().err
    assert "LimitMEMLOCK=infinity" in term.read_text()
    limits["now"] = (INF, INF)
    ws.main(["/usr/sbin/sshd", "-De"], dev_dir=dev, proc_status=status)
    assert ran == [("/usr/sbin/sshd", ["/usr/sbin/sshd", "-De"])]
    assert (tmp_path / ".kfp_gpu_worker_env").exists()


def test_builders_set_the_rdma_flag_on_workers_only_with_rdma():
    def worker_env(job):
        c = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in c["env"]}

    base = {"name": "r", "namespace": "ns", "gpu": "gpu:1", "image": "img:1",
            "program": ("python", "-c", "pass")}
    on = MPIJobOptions.from_settings(**base, rdma=True)
    off = MPIJobOptions.from_settings(**base)
    assert worker_env(mpijob.build(on))[ws.RDMA_ENV] == "1"
    assert ws.RDMA_ENV not in worker_env(mpijob.build(off))
    assert network.Network(rdma=True).worker_env() == {ws.RDMA_ENV: "1"}
    tj_env = {e["name"]: e["value"] for e in trainjob.build(on)["spec"]["trainer"]["env"]}
    assert tj_env[ws.RDMA_ENV] == "1"
