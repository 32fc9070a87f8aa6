"""(f) The launcher under a ServiceAccount bound to the project's Role (manifests/rbac), on
kube-apiserver v1.36.3 with ``--authorization-mode=Node,RBAC`` (kwokctl's binary runtime,
pkg/kwokctl/components/kube_apiserver.go): what the launcher does is allowed; a Role
without one verb makes the launcher fail with the API server's 403 naming that verb, and
doctor's RBAC verdict (SelfSubjectAccessReview per permission,
kfp_gpu/cluster/doctor/rbac.py) agrees with what happened.

The token is a TokenRequest for the ServiceAccount (``kubectl create token``, the
projected token a pod gets; authentication/v1), the CA the cluster's own.
"""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes.client.exceptions import ApiException

from kfp_gpu.cluster.doctor import Needs, build_report, gather
from kfp_gpu.cluster.doctor.rbac import LAUNCHER_PERMISSIONS
from tests.cluster import jobs, kube
from tests.cluster.access import SA, install_rbac, sa_client


def test_the_role_allows_everything_the_launcher_does(plane, api, namespace, tmp_path):
    install_rbac(plane, namespace)
    client = sa_client(plane, namespace, tmp_path)
    name = "resnet-rbac"
    run = jobs.Launch(client, jobs.component_job(namespace, name), tmp_path / "record.json")
    run.start()
    jobs.end_launcher(api, namespace, name, "succeed")
    result, error = run.outcome()
    assert error is None, error
    assert result.status == "Succeeded"
    facts = gather(api, namespace=namespace, service_account=SA)
    assert {(a.group, a.resource, a.verb): a.allowed for a in facts.access} == {
        p: True for p in LAUNCHER_PERMISSIONS}


@pytest.mark.parametrize("resource,verb,when", [
    ("mpijobs", "create", "first"),   # the create
    ("mpijobs", "watch", "first"),    # the status watch
    ("mpijobs", "get", "retry"),      # only a retried task's 409 -> GET re-attach needs it
])
def test_a_missing_verb_fails_and_doctor_names_it(plane, api, namespace, tmp_path,
                                                  resource, verb, when):
    install_rbac(plane, namespace, drop=(resource, verb))
    client = sa_client(plane, namespace, tmp_path)
    name = "resnet-rbac"
    job = jobs.component_job(namespace, name)
    if when == "retry":  # an earlier attempt (with every permission) created the job
        first = jobs.Launch(api, job, tmp_path / "first.json")
        first.start()
        jobs.launcher_pod(api, namespace, name)
    run = jobs.Launch(client, job, tmp_path / "record.json")
    run.start()
    _, error = run.outcome()
    assert isinstance(error, ApiException) and error.status == 403, error
    if when != "retry":  # (the first attempt's follower is still at work there)
        # no log follower left polling after an API error (one was, before)
        kube.wait_for(lambda: not any(t.name == "launcher-log" and t.is_alive()
                                      for t in threading.enumerate()), 10,
                      "the launcher-log thread to stop")
    message = json.loads(error.body)["message"]
    assert f'cannot {verb} resource "{resource}"' in message, message
    assert f"system:serviceaccount:{namespace}:{SA}" in message
    if when == "retry":
        jobs.end_launcher(api, namespace, name, "succeed")
        assert first.outcome()[1] is None

    facts = gather(api, namespace=namespace, service_account=SA)
    denied = {(a.resource, a.verb) for a in facts.access if a.allowed is False}
    assert denied == {(resource, verb)}
    report = build_report(facts, Needs(mpi=True))
    assert any(f"may not {verb} {resource}" in p for p in report.problems), report.problems


def test_the_opt_in_lease_grant_lets_the_launcher_read_the_operators_lease_and_no_more(
        plane, namespace, tmp_path):
    """manifests/rbac-operator-leases: without it the launcher's account gets a 403 on the MPI
    Operator's leader Lease (kfp_gpu.mpi.launch.stall then turns its "nobody reconciles"
    check off); with it (subjects moved to the run's namespace, as a profile would) it reads
    that Lease, with the holder the stall check needs, and still cannot list Leases or read
    another one. The plane's Trainer runs without leader election, so only the MPI Operator's
    half is exercised here (tests/unit/test_manifests.py checks both halves' shape)."""
    from kubernetes import client as k8s

    from kfp_gpu.mpi.launch.stall import OPERATOR_LEASES, lease_record
    from tests.cluster.objects import kustomized

    lease = OPERATOR_LEASES["mpijob"]
    install_rbac(plane, namespace)
    coordination = k8s.CoordinationV1Api(sa_client(plane, namespace, tmp_path))
    with pytest.raises(ApiException) as refused:
        coordination.read_namespaced_lease(lease.name, lease.namespace)
    assert refused.value.status == 403
    grant = [d for d in kustomized(plane, "rbac-operator-leases")
             if d["metadata"]["namespace"] == lease.namespace]
    assert sorted(d["kind"] for d in grant) == ["Role", "RoleBinding"]
    for d in grant:
        for s in d.get("subjects") or []:
            s["namespace"] = namespace
    plane.apply(grant)
    try:
        read = kube.wait_for(lambda: _readable(coordination, lease), timeout=30,
                             what=f"the Lease {lease} readable by the launcher's account")
        holder, renewed, duration = lease_record(read)
        assert holder and renewed and duration > 0
        with pytest.raises(ApiException) as listing:
            coordination.list_namespaced_lease(lease.namespace)
        assert listing.value.status == 403
        with pytest.raises(ApiException) as other:
            coordination.read_namespaced_lease("kube-controller-manager", "kube-system")
        assert other.value.status == 403
    finally:
        for d in grant:
            plane.kubectl("delete", d["kind"].lower(), d["metadata"]["name"], "-n",
                          lease.namespace, "--ignore-not-found", check=False)


def _readable(coordination, lease) -> dict | None:
    """The Lease as API JSON (what the launcher's reader gets), or None while the API server
    still refuses it (its RBAC informer has not seen the new binding yet)."""
    try:
        return json.loads(coordination.read_namespaced_lease(
            lease.name, lease.namespace, _preload_content=False).data)
    except ApiException as e:
        if e.status == 403:
            return None
        raise
