"""A job that lost a pod to a node that stopped answering (kfp_gpu/mpi/launch/node_lost.py):
the pure reading of pods as the taint-eviction controller leaves them (k8s.io/kubernetes
v1.36.3 pkg/controller/tainteviction/taint_eviction.go ``addConditionAndDeletePod``:
condition ``DisruptionTarget`` reason ``DeletionByTaintManager``, then DELETE; the pod
stays Terminating with phase Running while its kubelet is away), and the whole
``launcher.launch`` on the Kubernetes API double (tests/doubles/k8s_api.py): one line,
the job deleted, ``NodeLost``. The real node lost on the plane: tests/cluster/
test_chaos_node.py."""

from __future__ import annotations

import logging

import pytest

from kfp_gpu.mpi.launch import node_lost
from kfp_gpu.mpi.spec import backends, crd, mpijob, options
from tests.doubles.k8s_api import FakeKube, ScriptedController
from tests.support.launcher_runs import run

NS, NAME = "ml", "resnet-lost"
#: The condition taint_eviction.go sets before it deletes the pod.
TAINT_MANAGER = {"type": "DisruptionTarget", "status": "True",
                 "reason": "DeletionByTaintManager",
                 "message": "Taint manager: deleting due to NoExecute taint"}
#: The tolerations the API server's DefaultTolerationSeconds admission adds
#: (plugin/pkg/admission/defaulttolerationseconds/admission.go).
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}]


def pod(name: str, *, deleting: bool = True, conditions=(TAINT_MANAGER,),
        phase: str = "Running", tolerations=DEFAULT_TOLERATIONS) -> dict:
    meta = {"name": name, "namespace": NS}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:05:45Z"
    return {"metadata": meta,
            "spec": {"nodeName": "kfp-gpu-real-node", "tolerations": list(tolerations)},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "False"}, *conditions]}}


# ------------------------------------------------------------------ pure
def test_a_pod_the_taint_manager_deleted_is_lost_others_are_not():
    lost = node_lost.lost_pods([
        pod("w-1"), pod("w-0"),
        pod("not-deleted", deleting=False),  # the condition alone: not yet deleted
        pod("drained", conditions=({**TAINT_MANAGER, "reason": "EvictionByEvictionAPI"},)),
        pod("done", phase="Failed"),  # its kubelet ended it: the operator sees that
        pod("deleted-by-hand", conditions=())])
    assert [(p.pod, p.node, p.reason, p.toleration_s) for p in lost] == [
        ("w-0", "kfp-gpu-real-node", "DeletionByTaintManager", 300),
        ("w-1", "kfp-gpu-real-node", "DeletionByTaintManager", 300)]


def test_the_toleration_read_is_the_smallest_for_the_lost_node_taints():
    short = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 60}
    assert node_lost.toleration_s(pod("p", tolerations=[*DEFAULT_TOLERATIONS, short])) == 60
    forever = {"operator": "Exists"}  # tolerates every taint with no limit
    assert node_lost.toleration_s(pod("p", tolerations=[forever])) is None
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert node_lost.toleration_s(pod("p", tolerations=[gpu])) is None


def test_the_message_is_one_line_naming_pods_node_toleration_and_why():
    text = node_lost.message(node_lost.lost_pods([pod("w-1"), pod("w-0")]))
    assert "\n" not in text
    assert text.startswith("pods w-0, w-1 deleted from node kfp-gpu-real-node by the taint "
                           "manager after tolerating its NoExecute taint for 300 s "
                           "(DeletionByTaintManager: Taint manager: deleting due to NoExecute "
                           "taint)")
    assert text.endswith("an MPI job cannot go on without one of its ranks")
    one = node_lost.message(node_lost.lost_pods([pod("w-0", tolerations=[])]))
    assert one.startswith("pod w-0 deleted from node kfp-gpu-real-node by the taint manager "
                          "(DeletionByTaintManager")


class _Core:
    """A CoreV1Api stand-in whose LIST answers ``pods`` (raw JSON) and counts calls."""

    def __init__(self, pods, fail: bool = False):
        self.pods, self.fail, self.calls = pods, fail, 0

    def list_namespaced_pod(self, ns, **kw):
        import json

        self.calls += 1
        if self.fail:
            raise ConnectionError("the API server does not answer")
        assert kw["label_selector"] == f"{crd.JOB_NAME_LABEL}={NAME}"

        class _Resp:
            data = json.dumps({"items": self.pods}).encode()

            def release_conn(self) -> None:
                pass
        return _Resp()


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


RUNNING = {"status": {"conditions": [{"type": "Created", "status": "True"},
                                     {"type": "Running", "status": "True"}]}}
DONE = {"status": {"conditions": [*RUNNING["status"]["conditions"],
                                  {"type": "Succeeded", "status": "True"}]}}


def test_the_guard_lists_pods_at_most_every_poll_and_not_for_a_finished_job():
    clock, core = _Clock(), _Core([pod("w-0", deleting=False)])
    guard = node_lost.NodeLossGuard(core, backends.MPIJOB, NS, NAME, poll_s=30, clock=clock)
    calls = []
    for now, obj in ((0, RUNNING), (29, RUNNING), (30, RUNNING), (30, RUNNING), (59, RUNNING),
                     (60, DONE), (60, None), (60, RUNNING)):
        clock.now = now
        guard.check(obj)
        calls.append(core.calls)
    # the first look poll_s after the guard began, then every poll_s; none for a job
    # that ended (or is not known)
    assert calls == [0, 0, 1, 1, 1, 1, 1, 2]
    core.pods = [pod("w-0")]
    clock.now = 90
    with pytest.raises(node_lost.NodeLost) as e:
        guard.check(RUNNING)
    assert e.value.reason == "NodeLost" and e.value.message.startswith("pod w-0 deleted")


def test_a_list_that_fails_is_let_go():
    core = _Core([pod("w-0")], fail=True)
    node_lost.NodeLossGuard(core, backends.MPIJOB, NS, NAME, poll_s=0, clock=_Clock()
                            ).check(RUNNING)
    assert core.calls == 1


# ------------------------------------------------------------------ on the double
def test_the_launcher_ends_a_job_that_lost_a_pod_and_deletes_it(tmp_path, caplog,
                                                               monkeypatch):
    """The operator keeps the job Running (mpi-operator v0.8.2 does, while the node is
    away); a Worker pod is deleted by the taint manager: the launcher's next look at the
    pods ends it with one line and deletes the job (Foreground)."""
    monkeypatch.setattr(node_lost, "POLL_S", 0.2)
    caplog.set_level(logging.INFO, logger="kfp_gpu")
    job = mpijob.build(options.MPIJobOptions.from_settings(
        name=NAME, namespace=NS, image="horovod:test", program=("kfp-gpu", "x"), workers=2))
    with FakeKube() as kube:
        kube.controller = ScriptedController(outcome=None, log=["step 1"], step_s=0.05)
        worker = f"{NAME}-worker-0"
        kube.create_pod(NS, worker, {crd.JOB_NAME_LABEL: NAME, crd.JOB_ROLE_LABEL: "worker"},
                        owner=NAME)
        gone = pod(worker)
        kube.set_pod_status(NS, worker, gone["status"])
        kube.objects[("pods", NS, worker)]["spec"].update(gone["spec"])
        kube.add_finalizer("pods", NS, worker, "kubernetes")  # stays, as without its kubelet
        kube.delete_pod(NS, worker)
        with pytest.raises(node_lost.NodeLost) as e:
            run(kube, job, tmp_path / "rec.json", watch_timeout_s=5)
        deletes = list(kube.deletes)
    first = str(e.value).splitlines()[0]
    assert first.startswith(f"MPIJob {NAME} failed: NodeLost: pod {worker} deleted from node "
                            "kfp-gpu-real-node by the taint manager after tolerating"), first
    assert deletes == [{"name": NAME, "namespace": NS, "propagationPolicy": "Foreground"}]
    said = [r.getMessage() for r in caplog.records if "deleting it" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"MPIJob {NS}/{NAME}: NodeLost: pod {worker}")
