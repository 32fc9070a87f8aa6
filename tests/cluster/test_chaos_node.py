"""The real node lost while the component's launcher waits on a training job there (marker
``chaos``: ``make chaos`` on a ``make cluster-up NODE=1`` plane; docs/reliability.md,
scenario 3).

The job is train_resnet_horovod's MPIJob (tests/cluster/real_node.py's ``resnet_job``, with one
``nvidia.com/gpu`` per Worker from the node's four), checkpointing to a hostPath PVC.
Once it wrote its first checkpoint the node is lost: its kubelet is SIGKILLed and held
down (the plane's supervisor, testcluster/supervise.py, leaves it down), and the pods'
processes are frozen (the cgroup freezer on the node's cgroup root), as a machine that
went away stops both reporting and working. What follows, k8s.io/kubernetes v1.36.3:

1. the node lifecycle controller marks the node ``Ready: Unknown`` after
   ``--node-monitor-grace-period`` and taints it ``node.kubernetes.io/unreachable:NoExecute``
   (pkg/controller/nodelifecycle/node_lifecycle_controller.go, checked every
   ``--node-monitor-period``). Both are read from kube-controller-manager's argv: kwokctl
   v0.8.0 passes its 40 s and 5 s times ``--heartbeat-factor`` 5, so 3m20s and 25s on the
   plane (pkg/kwokctl/cmd/create/cluster/cluster.go ``multiplyByFactor``), where
   upstream's defaults are 50 s and 5 s (pkg/controller/nodelifecycle/config/v1alpha1/
   defaults.go);
2. the taint-eviction controller deletes the job's pods after their toleration of that
   taint, which the component does not set: the API server's DefaultTolerationSeconds
   admission gives every pod 300 s (plugin/pkg/admission/defaulttolerationseconds/
   admission.go), after setting ``DisruptionTarget``/``DeletionByTaintManager``
   (pkg/controller/tainteviction/taint_eviction.go); the pods stay Terminating, phase
   Running, with the kubelet away;
3. mpi-operator v0.8.2 does not fail the job meanwhile (pkg/controller/
   mpi_job_controller.go: an evicted Worker counts only in phase Failed with reason
   Evicted; the Launcher Job's ``podReplacementPolicy: Failed`` keeps the Job controller
   from counting a terminating pod, pkg/controller/job/job_controller.go ``isPodFailed``),
   so the launcher's node check (kfp_gpu/mpi/launch/node_lost.py, every 30 s) ends it:
   one line with reason ``NodeLost``, the job deleted (Foreground), exit status 1.

The test asserts the launcher ends within the bound those settings give (grace + monitor
period + toleration + the launcher's 30 s + 30 s of controller latency), that from then
on every pod with a GPU request on the node is being deleted, and, once the node is back
(pods thawed, kubelet released: it ends the deleted pods, the Foreground deletion
completes), that no pod of the namespace requests a GPU and the job is gone; a rerun of
the same task (same job name, as a KFP retry) then resumes from the checkpoint
(tf.train.CheckpointManager, kfp_gpu/training/horovod_train.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from pathlib import Path

import pytest

from kfp_gpu.mpi.launch import node_lost
from testcluster import node, node_config, supervise
from tests.cluster import jobs, kube
from tests.cluster.chaos import Reader, component_pid
from tests.cluster.real_node import bind_pvcs, resnet_job

pytestmark = [pytest.mark.node, pytest.mark.chaos, pytest.mark.timeout(2700)]

GPU = "nvidia.com/gpu"
#: kube-controller-manager's defaults where its argv does not set them
#: (pkg/controller/nodelifecycle/config/v1alpha1/defaults.go).
DEFAULT_GRACE_S, DEFAULT_PERIOD_S = 50, 5
#: Latency of the controllers between the toleration's end and the launcher's look: the
#: taint-eviction queue, the NoExecute tainting pass (rate-limited per zone).
SLACK_S = 30
CHECKPOINTS = "/work/run/checkpoints"


def republished(left: list, removed: list) -> tuple[list, list]:
    """:func:`tests.cluster.leftovers.difference`'s (left, removed) less the ResourceSlices
    the node's DRA driver published anew: one removed and one left with the same name but
    for the suffix its ``generateName`` added. Pure."""
    def stem(key) -> str:
        return key[2].rsplit("-", 1)[0]

    new = {stem(k): k for k in left if k[0] == "ResourceSlice"}
    drop = {k for k in removed if k[0] == "ResourceSlice" and stem(k) in new}
    drop |= {new[stem(k)] for k in drop}
    return [k for k in left if k not in drop], [k for k in removed if k not in drop]


@pytest.fixture(scope="module", autouse=True)
def leaves_the_plane_as_found(request, plane):
    """tests/cluster/conftest.py's check, with the real node's ResourceSlices counted by
    their driver and node rather than their name: the kubelet started again deletes every
    ResourceSlice of its node at its start (k8s.io/kubernetes v1.36.3
    pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go ``NewDRAPluginManager``:
    ``wipeResourceSlices`` of all drivers), and dra-example-driver publishes its devices
    again under a new generated name."""
    from tests.cluster import conftest, leftovers

    before = leftovers.snapshot(plane)
    yield
    left, removed = republished(*leftovers.difference(before, leftovers.snapshot(plane),
                                                      conftest.SESSION_OBJECTS))
    if left or removed:
        pytest.fail(leftovers.describe(request.module.__name__, left, removed), pytrace=False)


def go_seconds(text: str) -> float:
    """A Go duration as kube-controller-manager's flags print it (``40s``, ``1m0s``,
    ``500ms``) in seconds. Pure."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"([\d.]+)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def controller_flag(plane, flag: str, default: float) -> float:
    """``--flag=DURATION`` of kube-controller-manager's argv as the supervisor runs it
    (kwokctl's, adopted: testcluster/processes.py), in seconds."""
    spec = json.loads((supervise.folder(plane.dir) / "kube-controller-manager.json").read_text())
    for arg in spec["argv"]:
        if arg.startswith(f"--{flag}="):
            return go_seconds(arg.split("=", 1)[1])
    return default


def freeze(cgroup_root: str, frozen: bool) -> None:
    """Freeze (or thaw) every process under the node's cgroup root: the cgroup v1 freezer
    (``freezer.state``), or cgroup v2's ``cgroup.freeze``; both freeze the subtree
    (kernel Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst, cgroup-v2.rst)."""
    v1 = Path("/sys/fs/cgroup/freezer") / cgroup_root.lstrip("/")
    if v1.is_dir():
        (v1 / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        return
    (Path("/sys/fs/cgroup") / cgroup_root.lstrip("/") / "cgroup.freeze").write_text(
        "1" if frozen else "0")


def gpu_job(ns: str, name: str, image: str) -> dict:
    """:func:`resnet_job` for 3 epochs of 60 steps, checkpointing to the ``work`` PVC, with
    one ``nvidia.com/gpu`` per Worker."""
    return resnet_job(ns, name, image, epochs=3, steps=60, checkpoint_dir=CHECKPOINTS,
                      gpu="gpu:1", run_id="lost")


def gpu_pods(api, ns: str) -> dict[str, bool]:
    """``{pod: being deleted}`` of the pods of ``ns`` bound to a node, not finished, with
    a container requesting ``nvidia.com/gpu``: what holds GPUs of a node."""
    out = {}
    for p in kube.pods(api, ns):
        if not p.spec.node_name or p.status.phase in ("Succeeded", "Failed"):
            continue
        if any(GPU in ((c.resources and c.resources.requests) or {}) for c in p.spec.containers):
            out[p.metadata.name] = p.metadata.deletion_timestamp is not None
    return out


def node_view(plane) -> tuple[str, list[str]]:
    """The real node's Ready status and its NoExecute taints' keys."""
    n = json.loads(plane.kubectl("get", "node", node_config.NODE_NAME, "-o", "json").stdout)
    ready = next((c["status"] for c in n["status"].get("conditions") or []
                  if c["type"] == "Ready"), "")
    return ready, [t["key"] for t in n["spec"].get("taints") or []
                   if t.get("effect") == "NoExecute"]


def slice_devices(plane) -> int:
    """Devices in the real node's ResourceSlices."""
    r = plane.kubectl("get", "resourceslices", "--field-selector",
                      f"spec.nodeName={node_config.NODE_NAME}", "-o", "json")
    return sum(len(s["spec"].get("devices") or []) for s in json.loads(r.stdout)["items"])


def start_launcher(plane, job: dict, tmp: Path, tag: str):
    """The component's launcher as a process, its two streams drained by threads."""
    d = tmp / tag
    d.mkdir()
    proc = jobs.launcher_process(plane, job, d, "--backoff-initial", "1", "--watch-timeout",
                                 "30", "--pending-timeout", "300")
    out, err = Reader(proc.stdout), Reader(proc.stderr)
    out.start()
    err.start()
    return proc, out, err


def test_the_real_node_lost_mid_run_ends_the_job_and_a_rerun_resumes(
        supervised, api, namespace, horovod, pvs, shared_data, tmp_path):
    plane = supervised
    image = horovod
    work = bind_pvcs(api, namespace, pvs, shared_data, tmp_path)
    ckpt = work / "run" / "checkpoints"
    name = f"lost-{uuid.uuid4().hex[:5]}"
    grace = controller_flag(plane, "node-monitor-grace-period", DEFAULT_GRACE_S)
    period = controller_flag(plane, "node-monitor-period", DEFAULT_PERIOD_S)
    cgroup_root = json.loads(node.state_file(plane.dir).read_text())["cgroup_root"]
    proc, out, err = start_launcher(plane, gpu_job(namespace, name, image), tmp_path, "first")
    marks: dict[str, float] = {}
    try:
        kube.wait_for(lambda: (ckpt / "checkpoint").exists(), 900,
                      f"the first checkpoint ({chr(10).join(out.lines[-10:])})", interval=1)
        held = gpu_pods(api, namespace)
        assert sorted(held) == [f"{name}-worker-0", f"{name}-worker-1"], held
        toleration = {node_lost.toleration_s(json.loads(plane.kubectl(
            "get", "pod", "-n", namespace, p, "-o", "json").stdout)) for p in held}
        assert len(toleration) == 1 and None not in toleration, toleration
        [toleration_s] = toleration
        bound = grace + period + toleration_s + node_lost.POLL_S + SLACK_S
        supervise.hold(plane.dir, "kubelet")
        t0 = time.monotonic()
        os.kill(component_pid(plane, "kubelet"), signal.SIGKILL)
        freeze(cgroup_root, True)
        while proc.poll() is None and time.monotonic() - t0 < bound + 120:
            ready, taints = node_view(plane)
            now = time.monotonic() - t0
            if ready != "True":
                marks.setdefault("node Ready Unknown", now)
            if "node.kubernetes.io/unreachable" in taints:
                marks.setdefault("unreachable NoExecute taint", now)
            if any(gpu_pods(api, namespace).values()):
                marks.setdefault("pods deleted by the taint manager", now)
            time.sleep(2)
        proc.wait(30)
        marks["launcher ended"] = time.monotonic() - t0
        held_after = gpu_pods(api, namespace)
        mj = jobs.mpijob(api, namespace, name)
    finally:
        freeze(cgroup_root, False)
        supervise.release(plane.dir, "kubelet")
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(10)
    err.join(10)
    stderr = "\n".join(err.lines)
    assert proc.returncode == 1, stderr[-4000:]
    said = [ln for ln in err.lines if ln.startswith(f"MPIJob {name} failed: ")]
    assert len(said) == 1 and said[0].startswith(f"MPIJob {name} failed: NodeLost: pod"), \
        said or stderr[-3000:]
    assert f"deleted from node {node_config.NODE_NAME} by the taint manager after " \
           f"tolerating its NoExecute taint for {toleration_s} s" in said[0]
    assert marks["launcher ended"] <= bound, (marks, bound)
    assert marks["node Ready Unknown"] <= grace + period + SLACK_S, marks
    assert marks["pods deleted by the taint manager"] >= toleration_s, marks
    # from the end on, nothing holds a GPU that is not being deleted; the job is going
    assert held_after and all(held_after.values()), held_after
    assert mj is None or mj["metadata"].get("deletionTimestamp"), mj
    assert not (work / "run" / "metrics.json").exists()
    saved = sorted(p.name for p in ckpt.glob("ckpt-*.index"))
    assert saved, list(ckpt.iterdir())

    # the node back: its kubelet ends the deleted pods, the Foreground deletion completes
    t1 = time.monotonic()
    kube.wait_for(lambda: node_view(plane)[0] == "True", 180, "the node Ready again",
                  interval=1)
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None
                  and not kube.pods(api, namespace, f"training.kubeflow.org/job-name={name}"),
                  240, "the lost job and its pods to go", interval=1)
    freed_s = time.monotonic() - t1
    assert gpu_pods(api, namespace) == {}
    kube.wait_for(lambda: slice_devices(plane) == 4, 120,
                  "dra-example-driver's devices published again", interval=1)
    allocatable = json.loads(plane.kubectl("get", "node", node_config.NODE_NAME, "-o",
                                           "json").stdout)["status"]["allocatable"]
    assert allocatable.get(GPU) == "4", allocatable  # the restarted kubelet kept them

    # a rerun of the same task resumes from the checkpoint
    proc2, out2, err2 = start_launcher(plane, gpu_job(namespace, name, image), tmp_path,
                                       "again")
    try:
        rc = proc2.wait(1200)
    finally:
        if proc2.poll() is None:
            proc2.kill()
            proc2.wait()
    out2.join(10)
    err2.join(10)
    assert rc == 0, "\n".join(err2.lines[-40:])
    m = json.loads((work / "run" / "metrics.json").read_text())
    assert m["resumed_from"] and m["start_epoch"] >= 1, m
    assert m["weights_identical"] is True
    print(f"\nnode lost at 0 s (kubelet killed, pods frozen); bound {bound:.0f} s = grace "
          f"{grace:g} + period {period:g} + toleration {toleration_s} + launcher poll "
          f"{node_lost.POLL_S} + slack {SLACK_S}\n  "
          + "; ".join(f"{k} +{v:.0f} s" for k, v in sorted(marks.items(), key=lambda kv: kv[1]))
          + f"\n  {said[0][:300]}\n  node back: the job and its pods gone after {freed_s:.0f} s"
          f"\n  rerun resumed from {m['resumed_from']} at epoch {m['start_epoch']}")
