"""(g) ``kfp-gpu doctor`` against the real control plane: the GPU nodes kwok serves (the
API double's node list), the MPIJob CRD of mpi-operator v0.8.2, the live operator (its
leader-election Lease, kfp_gpu/cluster/doctor/operators.py), the launcher's RBAC in the
namespace (SelfSubjectAccessReview on kube-apiserver v1.36.3 with RBAC), and where a
request fits. Kueue's half (a ``kueue_queue`` pipeline) is in test_kueue.py.
"""

from __future__ import annotations

from pathlib import Path

from kfp_gpu.cluster.doctor import Needs, build_report, gather
from kfp_gpu.cluster.doctor.model import ClusterFacts, OperatorFacts
from tests.cluster.access import SA, install_rbac
from tests.cluster.doctor_cli import doctor

REPO = Path(__file__).resolve().parents[2]


def test_doctor_says_ok_where_everything_is_there(plane, api, namespace):
    install_rbac(plane, namespace)
    r = doctor(plane, "--namespace", namespace, "--service-account", SA, "--gpu", "gpu:8")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for node in ("dgx-h100-01", "a100-mig-01", "t4-shared-01", "cpu-01"):
        assert node in out
    assert "mpijobs.kubeflow.org" in out and "v2beta1" in out
    assert "mpi-operator (Lease mpi-operator/mpi-operator)" in out and "leader " in out


def test_doctor_names_missing_rbac_for_an_mpijob_pipeline(plane, api, namespace):
    # no Role in the namespace, for a pipeline that launches an MPIJob: a problem (exit 1)
    r = doctor(plane, "--namespace", namespace, "--service-account", SA, "--pipeline",
               str(REPO / "pipelines" / "resnet_horovod.yaml"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"system:serviceaccount:{namespace}:{SA} may not create mpijobs" in r.stdout


def test_the_operator_lease_is_read_as_served(plane, api):
    facts = gather(api, namespace="default", service_account="")
    assert facts.operators.read and not facts.operators.error
    [(ns, holder, age, duration)] = facts.operators.leases
    assert (ns, duration) == ("mpi-operator", 15)  # v0.8.2 app/server.go leaseDuration
    assert holder and 0 <= age < 30
    assert not [p for p in build_report(facts, Needs(mpi=True)).problems if "Operator" in p]


def test_a_stale_or_missing_lease_is_a_problem_for_mpijob_pipelines():
    now_ish = [("mpi-operator", "host_1", 4.0, 15)]
    stale = [("mpi-operator", "host_1", 3600.0, 15)]
    for leases, bad in ((now_ish, False), (stale, True), ([], True)):
        facts = ClusterFacts(operators=OperatorFacts(leases=leases, read=True))
        problems = build_report(facts, Needs(mpi=True)).problems
        assert any("MPI Operator is not running" in p for p in problems) == bad, leases
        # a pipeline without an MPIJob does not care
        assert not any("MPI Operator" in p for p in build_report(facts, Needs()).problems)
