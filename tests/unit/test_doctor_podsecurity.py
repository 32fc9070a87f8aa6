"""kfp-gpu doctor reads the namespace's Pod Security labels: baseline or
restricted enforcement rejects RDMA Workers, which add IPC_LOCK. The pure judgement on
recorded nodes, then the command against the Kubernetes API double (tests/doubles)."""

from __future__ import annotations

import pytest

from kfp_gpu.cluster import doctor
from kfp_gpu.cluster.doctor import podsecurity
from kfp_gpu.cluster.doctor.model import PodSecurityFacts
from tests.doubles.k8s_cluster import FakeCluster
from tests.support.doctor_double import facts, nodes, run

ENFORCE = "pod-security.kubernetes.io/enforce"
MPI = doctor.Needs(mpi=True, source="pipeline resnet-horovod")


def report(levels: dict, needs: doctor.Needs = MPI, **kw) -> doctor.Report:
    ps = PodSecurityFacts(levels=levels, read=True)
    return doctor.build_report(facts(pod_security=ps, **kw), needs)


def ipc_lock_warnings(rep: doctor.Report) -> list[str]:
    return [w for w in rep.warnings if "IPC_LOCK" in w]


def test_labels_are_read_without_their_prefix():
    assert podsecurity.pod_security_labels({
        ENFORCE: "baseline", "pod-security.kubernetes.io/enforce-version": "v1.30",
        "pod-security.kubernetes.io/warn": "restricted", "team": "a"}) == {
        "enforce": "baseline", "enforce-version": "v1.30", "warn": "restricted"}


@pytest.mark.parametrize(("enforce", "warned"), [
    ("baseline", True), ("restricted", True), ("privileged", False), (None, False)])
def test_enforced_baseline_or_restricted_warns_about_ipc_lock(enforce, warned):
    levels = {"enforce": enforce} if enforce else {}
    rep = report(levels)
    found = ipc_lock_warnings(rep)
    assert bool(found) == warned
    if warned:
        assert f"enforces Pod Security '{enforce}'" in found[0]
        assert "pod-security-standards" in found[0] and "enforce=privileged" in found[0]
        assert "NET_BIND_SERVICE" in found[0]  # the capabilities baseline does allow
    assert rep.ok  # a warning: whether the job asks for RDMA is not known here
    section = next(s for s in rep.sections if s[0].startswith("Pod Security"))
    assert section[2][0] == ("enforce", enforce or "(unset: cluster default)", "-")


def test_restricted_also_names_the_fields_the_pods_lack():
    rep = report({"enforce": "restricted"})
    assert any("seccompProfile" in w and "runAsNonRoot" in w for w in rep.warnings)
    assert not any("seccompProfile" in w for w in report({"enforce": "baseline"}).warnings)


def test_no_rdma_nodes_or_no_distributed_job_no_warning():
    assert podsecurity.rdma_offered(facts())  # the recorded nodes offer rdma/...
    no_rdma = nodes()
    for n in no_rdma:
        n.allocatable = {k: v for k, v in n.allocatable.items() if not k.startswith("rdma/")}
    assert ipc_lock_warnings(report({"enforce": "baseline"}, nodes=no_rdma)) == []
    single_gpu = doctor.Needs(mpi=False, source="pipeline imdb-lstm")
    assert ipc_lock_warnings(report({"enforce": "baseline"}, needs=single_gpu)) == []
    # report-only mode (no pipeline, no request) judges for the distributed job
    assert ipc_lock_warnings(report({"enforce": "baseline"}, needs=doctor.Needs()))


def test_warn_or_audit_level_is_reported_not_enforced():
    rep = report({"warn": "baseline", "audit": "restricted"})
    assert ipc_lock_warnings(rep) == [
        w for w in rep.warnings if "admitted but reported" in w]
    assert len(ipc_lock_warnings(rep)) == 2


def test_doctor_reads_the_namespace_over_http(tmp_path):
    labels = {ENFORCE: "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}
    with FakeCluster(namespaces={"kubeflow": labels}) as c:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod")
        assert "== Pod Security admission: namespace kubeflow" in res.output
        assert "enforce  baseline" in res.output and "latest" in res.output
        assert "enforces Pod Security 'baseline', which forbids adding IPC_LOCK" in res.output
        assert {"method": "GET", "path": "/api/v1/namespaces/kubeflow",
                "user": "kubernetes-admin", "impersonated_by": ""} in c.requests


def test_missing_namespace_or_no_permission_is_a_warning(tmp_path):
    with FakeCluster(namespaces={}) as c:
        res = run(c, tmp_path, "--gpu", "gpu:1")
        assert 'cannot read namespace kubeflow\'s Pod Security labels: HTTP 404' in res.output
    with FakeCluster(tokens={"t": ("bob", ["system:authenticated"])},
                     cluster_grants={"bob": [{"apiGroups": [""], "resources": ["nodes"],
                                              "verbs": ["list"]}]}) as c:
        res = run(c, tmp_path, "--gpu", "gpu:1", "--service-account", "", token="t")
        assert "cannot read namespace kubeflow's Pod Security labels: HTTP 403" in res.output
        assert 'cannot get resource "namespaces"' in res.output
