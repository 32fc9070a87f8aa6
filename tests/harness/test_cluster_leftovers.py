"""tests/cluster/leftovers.py: the rule each cluster test module's teardown applies (leave
the plane as found), fed with API List items as kubectl returns them."""

from __future__ import annotations

from tests.cluster import leftovers


def item(kind: str, name: str, ns: str = "", deleting: bool = False) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T07:00:00Z"
    return {"kind": kind, "metadata": meta}


PLANE = [item("Namespace", "default"), item("Namespace", "kube-system"),
         item("ClusterRole", "admin"), item("ConfigMap", "kube-root-ca.crt", "default")]


def diff(before: list[dict], after: list[dict], session: set | None = None):
    return leftovers.difference(leftovers.parse(before), leftovers.parse(after),
                                session or set())


def test_a_plane_as_found_passes():
    assert diff(PLANE, PLANE + [item("Event", "x.1", "default"),
                                item("Lease", "kube-scheduler", "kube-system")]) == ([], [])


def test_an_object_made_and_left_is_named():
    left, removed = diff(PLANE, PLANE + [item("ClusterQueue", "cq"),
                                         item("Namespace", "kubeflow"),
                                         item("Secret", "s", "default")])
    assert left == [("ClusterQueue", "", "cq"), ("Namespace", "", "kubeflow"),
                    ("Secret", "default", "s")]
    assert removed == []


def test_a_removed_object_of_the_plane_is_named():
    assert diff(PLANE, PLANE[1:]) == ([], [("Namespace", "", "default")])


def test_a_deleted_test_namespace_and_what_is_in_it_do_not_count():
    after = PLANE + [item("Namespace", "t-x", deleting=True), item("Pod", "p", "t-x"),
                     item("ServiceAccount", "default", "t-x")]
    assert diff(PLANE, after) == ([], [])
    # the next module: the namespace and its pods are gone
    assert diff(after, PLANE) == ([], [])


def test_the_session_fixtures_objects_and_per_namespace_defaults_do_not_count():
    session = {("ClusterTrainingRuntime", "", "kfp-gpu-horovod")}
    after = PLANE + [item("ClusterTrainingRuntime", "kfp-gpu-horovod"),
                     item("ConfigMap", "kube-root-ca.crt", "kube-system")]
    assert diff(PLANE, after, session) == ([], [])
    assert diff(PLANE, after)[0] == [("ClusterTrainingRuntime", "", "kfp-gpu-horovod")]


def test_the_message_names_the_module_and_what_it_left():
    text = leftovers.describe("tests.cluster.test_x", [("Namespace", "", "kubeflow")],
                              [("Secret", "default", "s")])
    assert text.startswith("tests.cluster.test_x did not leave the plane as it found it")
    assert "left Namespace/kubeflow" in text and "removed Secret default/s" in text
    many = leftovers.describe("m", [("Namespace", "", f"n{i}") for i in range(20)], [])
    assert "and 8 more" in many


def test_an_object_being_deleted_counts_as_gone():
    """A test's PersistentVolume, deleted but held by kubernetes.io/pv-protection until its
    claim's namespace is gone, is not left by its module nor removed by the next."""
    pv = item("PersistentVolume", "t-x-work")
    ending = PLANE + [dict(pv, metadata={**pv["metadata"],
                                         "deletionTimestamp": "2026-11-28T08:00:00Z"})]
    assert diff(PLANE, ending) == ([], [])
    assert diff(ending, PLANE) == ([], [])
    # but a live one is left, and deleting one of the plane's is a removal
    assert diff(PLANE, PLANE + [pv])[0] == [("PersistentVolume", "", "t-x-work")]
    admin = PLANE[2]
    gone = [i for i in PLANE if i is not admin] + [
        dict(admin, metadata={**admin["metadata"], "deletionTimestamp": "2026-11-28T08:00:00Z"})]
    assert diff(PLANE, gone) == ([], [("ClusterRole", "", "admin")])


def test_the_snapshot_lists_every_kind_but_the_volatile_ones():
    """Columns as kubectl v1.36.3 prints them (`api-resources --no-headers`): a short name
    or none, the core group bare, other groups as resource.group."""
    text = """\
configmaps                  cm   v1                             true   ConfigMap
events                      ev   v1                             true   Event
apiservices                      apiregistration.k8s.io/v1      false  APIService
leases                           coordination.k8s.io/v1         true   Lease
events                      ev   events.k8s.io/v1               true   Event
clustertrainingruntimes          trainer.kubeflow.org/v1alpha1  false  ClusterTrainingRuntime
persistentvolumes           pv   v1                             false  PersistentVolume
"""
    assert leftovers.resources(text) == [
        "clustertrainingruntimes.trainer.kubeflow.org", "configmaps", "persistentvolumes"]
