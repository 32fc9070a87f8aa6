"""doctor and Kueue (kfp_gpu.cluster.doctor.kueue): a pipeline whose distributed task sets
``kueue_queue`` needs Kueue's LocalQueue CRD and that LocalQueue in the run's namespace,
else its job (created suspended) waits forever. Pipelines compiled by the real KFP compiler;
the report is pure. The same checks against the real Kueue v0.19.2 are in
tests/cluster/test_kueue.py. (No ``from __future__ import annotations``: KFP reads the
pipeline's annotations as types.)"""

from pathlib import Path

import yaml

from kfp_gpu.cluster import doctor
from kfp_gpu.cluster.doctor import kueue as dk
from tests.support.kueue_pipeline import queued_pipeline

REPO = Path(__file__).resolve().parents[2]


def facts(kf: dk.KueueFacts | None, namespace: str = "ml") -> doctor.ClusterFacts:
    return doctor.ClusterFacts(namespace=namespace, kueue=kf)


def installed(*queues: dk.LocalQueue) -> dk.KueueFacts:
    kf = dk.KueueFacts(queues={q.name: q for q in queues}, listed=True)
    kf.crd.present, kf.crd.served = True, ("v1beta1", "v1beta2")
    return kf


def test_queues_from_a_compiled_pipeline(tmp_path):
    spec = queued_pipeline(tmp_path / "p.yaml")
    assert dk.compiled_kueue_queues(spec[0]) == ("team-a", "team-b")
    needs = doctor.needs_from_pipeline(spec)
    assert needs.mpi and needs.kueue_queues == ("team-a", "team-b")
    # an empty pipeline-parameter default and no constant: nothing is queued
    spec = queued_pipeline(tmp_path / "q.yaml", default="", constant="")
    assert doctor.needs_from_pipeline(spec).kueue_queues == ()


def test_the_shipped_pipeline_queues_nothing():
    spec = list(yaml.safe_load_all((REPO / "pipelines" / "resnet_horovod.yaml").read_text()))
    assert doctor.needs_from_pipeline(spec).kueue_queues == ()


def test_a_queue_on_a_cluster_without_kueue_waits_forever():
    needs = doctor.Needs(mpi=True, kueue_queues=("team-a",))
    rep = doctor.build_report(facts(dk.KueueFacts()), needs)
    [p] = [p for p in rep.problems if "Kueue" in p]
    assert "a queue on a cluster without Kueue waits forever" in p
    assert "install Kueue v0.19.2" in p and "localqueues.kueue.x-k8s.io" in p
    assert "\n" not in p
    assert "Kueue not installed" in rep.render()
    # no queue: Kueue is not needed, and not shown
    rep = doctor.build_report(facts(dk.KueueFacts()), doctor.Needs(mpi=True))
    assert "Kueue" not in rep.render()


def test_the_local_queue_must_exist_and_be_active():
    needs = doctor.Needs(mpi=True, kueue_queues=("team-a", "team-b"))
    ok = dk.LocalQueue("team-a", "cq", active=True, reason="Ready")
    rep = doctor.build_report(facts(installed(ok)), needs)
    kueue = [p for p in rep.problems if "kueue_queue" in p]
    assert kueue == [("kueue_queue team-b: no LocalQueue team-b in namespace ml; Kueue never "
                     "admits a job queued there (it waits forever); create a LocalQueue "
                     "team-b (kueue.x-k8s.io) pointing at a ClusterQueue")]
    text = rep.render()
    assert "ml/team-a  cq" in text and "active" in text and "missing" in text
    off = dk.LocalQueue("team-b", "gone", active=False, reason="ClusterQueueDoesNotExist",
                        message="Can't submit new workloads to clusterQueue")
    rep = doctor.build_report(facts(installed(ok, off)), needs)
    [p] = [p for p in rep.problems if "kueue_queue" in p]
    assert "LocalQueue ml/team-b is not active (ClusterQueueDoesNotExist" in p
    rep = doctor.build_report(facts(installed(ok)), doctor.Needs(kueue_queues=("team-a",)))
    assert rep.ok, rep.problems


def test_unreadable_is_said_so_not_guessed():
    needs = doctor.Needs(kueue_queues=("team-a",))
    kf = dk.KueueFacts()
    kf.crd.error = "HTTP 403 Forbidden"
    assert "cannot read CRD localqueues.kueue.x-k8s.io" in dk.kueue_problems(kf, needs, "ml")[0]
    kf = installed()
    kf.listed, kf.error = False, "HTTP 403 Forbidden"
    assert dk.kueue_problems(kf, needs, "ml") == [
        ("cannot list LocalQueues in namespace ml (HTTP 403 Forbidden), so whether team-a "
        "exists is unknown")]
    assert dk.kueue_problems(None, needs, "ml") == []


def test_local_queue_from_a_kueue_object():
    obj = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"clusterQueue": "cq"},
           "status": {"conditions": [{"type": "Active", "status": "False",
                                      "reason": "ClusterQueueDoesNotExist", "message": "m"}]}}
    assert dk.local_queue(obj) == dk.LocalQueue("q", "cq", False, "ClusterQueueDoesNotExist",
                                                "m")
    assert dk.local_queue({"metadata": {"name": "q"}}).active is None
