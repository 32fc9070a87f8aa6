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
