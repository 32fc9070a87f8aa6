"""kfp-gpu doctor: the pure report builder on recorded Node objects, and the command against
a local Kubernetes API double (real HTTP, tests/doubles/k8s_cluster.py) with the real RBAC
manifests: refusals (401/403), a missing CRD, an unmet request, the KFP healthz check.
The opt-in run against a real cluster: tests/e2e/test_real_cluster.py."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml
from typer.testing import CliRunner

from kfp_gpu import gpu
from kfp_gpu.cli import doctor as doctor_cli
from kfp_gpu.cluster import doctor
from tests.doubles.k8s_cluster import (
    FakeCluster,
    kai_queue_crd,
    kai_scheduler_deployment,
    mpijob_crd,
    recorded_nodes,
)
from tests.doubles.kfp_api import FakeKfp
from tests.support.doctor_double import facts, nodes, run

REPO = Path(__file__).resolve().parents[2]


def fits(request_text: str, **kw) -> list[str]:
    rep = doctor.build_report(facts(**kw), doctor.needs_from_request(gpu.parse(request_text)))
    return rep.satisfied_by


# ------------------------------------------------------------------ pure report builder


def test_whole_gpus_fit_where_allocatable_suffices():
    raw = recorded_nodes()
    for n in (1, 8):
        expected = sorted(o["metadata"]["name"] for o in raw
                          if int(o["status"]["allocatable"].get(gpu.GPU_RESOURCE, "0")) >= n
                          and not o["spec"].get("unschedulable")
                          and doctor.HAMI_NODE_ANNOTATION not in o["metadata"]["annotations"])
        hami = [x.name for x in nodes() if 0 < doctor.hami_gpus(x) and n <= doctor.hami_gpus(x)]
        assert fits(f"gpu:{n}") == sorted(expected + hami)
    assert "dgx-h100-02" not in fits("gpu:1")  # cordoned
    rep = doctor.build_report(facts(), doctor.needs_from_request(gpu.parse("gpu:9")))
    assert not rep.ok and "no node can run a pod with nvidia.com/gpu: 9" in rep.problems[0]
    assert "nvidia.com/gpu: 8 allocatable < 9" in rep.problems[0]


def test_hami_vgpus_are_not_physical_gpus():
    (hami,) = [n for n in nodes() if doctor.HAMI_NODE_ANNOTATION in n.annotations]
    assert hami.allocatable[gpu.GPU_RESOURCE] == 40 and doctor.hami_gpus(hami) == 4
    assert hami.name in fits("gpu:4") and hami.name not in fits("gpu:5")
    assert fits("hami:1,mem=8000,cores=30") == [hami.name]
    assert fits("hami:1,mem=30000") == []  # A10s have 23028 MiB each


def test_every_request_kind_maps_to_the_nodes_that_serve_it():
    assert fits("mig:1g.10gb") == ["a100-mig-01"]
    assert fits("mig:3g.40gb") == ["a100-mig-01"]
    assert fits("mig:2g.20gb") == []  # profile not configured on the MIG node
    assert fits("shared:1,renamed=true") == ["t4-shared-01"]
    assert fits("shared:1,renamed=true,strategy=time-slicing") == ["t4-shared-01"]
    assert fits("shared:1,renamed=true,strategy=mps") == []  # GFD says time-slicing
    assert fits("metagpu:50") == ["l4-metagpu-01"]
    assert fits("gpu:1,product=NVIDIA-H100-80GB-HBM3") == ["dgx-h100-01"]


def test_fraction_needs_the_kai_scheduler():
    rep = doctor.build_report(facts(), doctor.needs_from_request(gpu.parse("fraction:0.5")))
    assert not rep.ok and any("KAI Scheduler" in p for p in rep.problems)
    with_kai = facts(crds={doctor.KAI_QUEUE_CRD: doctor.Crd(doctor.KAI_QUEUE_CRD, True, ("v2",))})
    rep = doctor.build_report(with_kai, doctor.needs_from_request(gpu.parse("fraction:0.5")))
    assert rep.ok and "dgx-h100-01" in rep.satisfied_by
    rep = doctor.build_report(with_kai, doctor.needs_from_request(gpu.parse("gpu-memory:40000")))
    big = sorted(n.name for n in nodes() if n.allocatable.get(gpu.GPU_RESOURCE, 0) >= 1
                 and int(n.labels.get("nvidia.com/gpu.memory", "0")) >= 40000
                 and not n.unschedulable)
    assert rep.satisfied_by == big and big


def test_mpi_pipeline_needs_crd_version_and_rbac():
    needs = doctor.Needs(resources={gpu.GPU_RESOURCE: 8}, mpi=True)
    missing = facts(crds={doctor.MPIJOB_CRD: doctor.Crd(doctor.MPIJOB_CRD, False)})
    rep = doctor.build_report(missing, needs)
    assert any("MPI Operator is not installed" in p and doctor.MPI_OPERATOR_RELEASE in p
               for p in rep.problems)
    old = facts(crds={doctor.MPIJOB_CRD: doctor.Crd(doctor.MPIJOB_CRD, True, ("v1",))})
    assert any("does not serve v2beta1" in p for p in doctor.build_report(old, needs).problems)
    denied = facts(subject="sa", access=[doctor.Access(g, r, v, r != "pods/log")
                                         for g, r, v in doctor.LAUNCHER_PERMISSIONS])
    rep = doctor.build_report(denied, needs)
    assert any("may not get pods/log" in p for p in rep.problems)
    # Without an MPI pipeline the same gaps are warnings, not failures.
    rep = doctor.build_report(denied, doctor.Needs(resources={gpu.GPU_RESOURCE: 1}))
    assert rep.ok and any("may not get pods/log" in w for w in rep.warnings)


def test_needs_from_compiled_pipeline():
    spec = list(yaml.safe_load_all((REPO / "pipelines" / "imdb_lstm.yaml").read_text()))
    needs = doctor.needs_from_pipeline(spec)
    accel = [e["container"]["resources"]["accelerator"]
             for e in spec[0]["deploymentSpec"]["executors"].values()
             if "accelerator" in e["container"].get("resources", {})]
    assert needs.resources == {a["resourceType"]: int(a["resourceCount"]) for a in accel}
    assert not needs.mpi
    over = doctor.needs_from_pipeline(spec, gpu.parse("mig:1g.10gb"))
    assert over.resources == {"nvidia.com/mig-1g.10gb": 1}


def test_report_renders_a_table():
    text = doctor.build_report(facts(), doctor.needs_from_request(gpu.parse("gpu:1"))).render()
    assert "== GPU / RDMA nodes" in text and "rdma/rdma_shared_device_a=63" in text
    assert "gpu.product=NVIDIA-H100-80GB-HBM3" in text and "verdict: OK" in text
    assert "cpu-01" not in text.split("== Custom resources")[0]  # no GPU, not listed


# ------------------------------------------------------------------ the command over HTTP


def test_ready_cluster_with_real_rbac(tmp_path, rbac_objects):
    with FakeCluster(rbac_objects=rbac_objects) as c, FakeKfp() as kfp:
        res = run(c, tmp_path, "--pipeline", "imdb-lstm", "--kfp-host", kfp.url)
        assert res.exit_code == 0, res.output
        assert "served: v2beta1" in res.output and "verdict: OK" in res.output
        assert "(single-user)" in res.output
        reviews = [r for r in c.requests if r["path"].endswith("selfsubjectaccessreviews")]
        assert len(reviews) == len(doctor.LAUNCHER_PERMISSIONS)
        # what doctor asks about is exactly what manifests/rbac's Role grants
        role = next(o for o in rbac_objects if o["kind"] == "Role")
        assert sorted(r["review"] for r in reviews) == sorted(
            (g, res, verb) for rule in role["rules"] for g in rule["apiGroups"]
            for res in rule["resources"] for verb in rule["verbs"])
        assert {r["user"] for r in reviews} == {
            f"system:serviceaccount:kubeflow:{doctor.DEFAULT_SERVICE_ACCOUNT}"}
        assert {r["impersonated_by"] for r in reviews} == {"kubernetes-admin"}
        assert " NO" not in res.output


def test_unmet_request_exits_1_with_reason(tmp_path, rbac_objects):
    with FakeCluster(rbac_objects=rbac_objects) as c:
        res = run(c, tmp_path, "--gpu", "mig:2g.20gb")
        assert res.exit_code == 1
        assert "PROBLEM: no node can run a pod with nvidia.com/mig-2g.20gb: 1" in res.output


def test_missing_crd_fails_an_mpi_pipeline(tmp_path, rbac_objects):
    spec = list(yaml.safe_load_all((REPO / "pipelines" / "imdb_lstm.yaml").read_text()))
    for e in spec[0]["deploymentSpec"]["executors"].values():
        e["container"]["image"] = "ghcr.io/kfp-gpu/kfp-gpu-launcher:0.1.0"
    path = tmp_path / "mpi.yaml"
    path.write_text(yaml.safe_dump_all(spec))
    with FakeCluster(rbac_objects=rbac_objects, crds={}) as c:
        res = run(c, tmp_path, "--pipeline", str(path))
        assert res.exit_code == 1 and "MPI Operator is not installed" in res.output
    with FakeCluster(rbac_objects=rbac_objects,
                     crds={"mpijobs.kubeflow.org": mpijob_crd((("v1", True, True),))}) as c:
        assert "does not serve v2beta1" in run(c, tmp_path, "--pipeline", str(path)).output
    with FakeCluster(rbac_objects=[], crds={"mpijobs.kubeflow.org": mpijob_crd()}) as c:
        res = run(c, tmp_path, "--pipeline", str(path))  # ServiceAccount without the Role
        assert res.exit_code == 1 and "may not create mpijobs" in res.output


def test_401_unauthorized(tmp_path):
    with FakeCluster() as c:
        res = run(c, tmp_path, "--gpu", "gpu:1", token="wrong")
        assert res.exit_code == 1
        assert "401" in res.output and "cannot reach the Kubernetes API" in res.output


def test_403_namespaced_user(tmp_path, rbac_objects):
    """A user who may do nothing cluster-wide: nodes and impersonation are refused."""
    with FakeCluster(rbac_objects=rbac_objects,
                     tokens={"dev-token": ("alice", ["system:authenticated"])},
                     cluster_grants={}) as c:
        res = run(c, tmp_path, "--gpu", "gpu:1", token="dev-token")
        assert res.exit_code == 1
        assert 'cannot list nodes: HTTP 403' in res.output
        assert 'User "alice" cannot list resource "nodes"' in res.output
        # kube-apiserver v1.36.3 (constrained impersonation): the refused request named
        assert ('cannot impersonate-on:serviceaccount:create resource '
                '"selfsubjectaccessreviews"') in res.output
        # As itself (inside the launcher pod it would be the SA): reviews answer "no".
        res = run(c, tmp_path, "--service-account", "", token="dev-token")
        assert re.search(r"create mpijobs \(kubeflow.org\) +NO", res.output)


def test_kai_crd_present_makes_fractions_schedulable(tmp_path):
    with FakeCluster(crds={"queues.scheduling.run.ai": kai_queue_crd()},
                     deployments=[kai_scheduler_deployment()],
                     kai_queues=["default-queue"]) as c:
        res = run(c, tmp_path, "--gpu", "fraction:0.25")
        assert res.exit_code == 0, res.output
    with FakeCluster() as c:
        res = run(c, tmp_path, "--gpu", "fraction:0.25")
        assert res.exit_code == 1 and "KAI Scheduler" in res.output


def test_kfp_backend_older_than_the_pipeline_needs(tmp_path, rbac_objects):
    """resnet-horovod's MPIJob component uses taskConfigPassthroughs: KFP backend >= 2.15.0
    (kubeflow/pipelines #12185); healthz tag_name tells the backend release."""
    with FakeCluster(rbac_objects=rbac_objects) as c, FakeKfp(tag_name="2.14.3") as kfp:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--kfp-host", kfp.url)
        assert res.exit_code == 1 and "2.14.3 is older than 2.15.0" in res.output, res.output
    with FakeCluster(rbac_objects=rbac_objects) as c, FakeKfp(tag_name="unknown") as kfp:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--kfp-host", kfp.url)
        assert "warning: KFP backend version 'unknown'" in res.output
        assert "older than" not in res.output


def test_backend_requirements_of_compiled_specs():
    from kfp_gpu.cluster import kfp_api

    spec = {"deploymentSpec": {"executors": {"exec-t": {"container": {"resources": {
        "accelerator": {"resourceType": "nvidia.com/gpu",
                        "resourceCount": "{{$.inputs.parameters['pipelinechannel--n']}}"}}}}}}}
    need = kfp_api.backend_requirements(spec)
    assert [v for v, _ in need] == [(2, 4, 0)]
    assert kfp_api.version_problems("2.3.0", need)[0] == [
        ("KFP backend 2.3.0 is older than 2.4.0, needed because exec-t: accelerator count is "
        "a pipeline parameter")]
    assert kfp_api.version_problems("v2.4.0", need) == ([], [])
    spec["deploymentSpec"]["executors"]["exec-t"]["container"]["resources"]["accelerator"][
        "resourceCount"] = "2"
    assert kfp_api.backend_requirements(spec) == []
    # the needs of such a pipeline are still computed (a parameter counts as one device)
    assert doctor.needs_from_pipeline(
        {**spec, "deploymentSpec": {"executors": {"exec-t": {"container": {"resources": {
            "accelerator": {"resourceType": "nvidia.com/gpu",
                            "resourceCount": "{{$.inputs.parameters['n']}}"}}}}}}}
    ).resources == {"nvidia.com/gpu": 1}


def test_kfp_api_not_answering(tmp_path):
    with FakeCluster() as c, FakeKfp(tokens={"x"}) as kfp:
        res = run(c, tmp_path, "--kfp-host", kfp.url)
        assert res.exit_code == 1 and "does not answer: HTTP 401" in res.output


def test_kfp_check_is_shown_when_the_kubernetes_api_does_not_answer(tmp_path):
    """--kfp-host's result is in the report even without a cluster, and an
    unreachable Kubernetes API is exit status 3 (not 1: nothing was judged)."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    app = typer.Typer()
    app.command()(doctor_cli.doctor_command)
    with FakeKfp(tag_name="2.15.0") as kfp:
        res = CliRunner().invoke(app, ["--kubeconfig", str(kc), "--kfp-host", kfp.url])
    assert res.exit_code == 3, res.output
    assert re.search(rf"^{re.escape(kfp.url)} +ok \(single-user\) +2\.15\.0$", res.output,
                     re.MULTILINE), res.output
    assert "cannot reach the Kubernetes API" in res.output


def test_kfp_api_unreachable_is_exit_3(tmp_path):
    with FakeCluster() as c:
        res = run(c, tmp_path, "--kfp-host", "http://127.0.0.1:1")
    assert res.exit_code == 3, res.output
    assert re.search(r"^http://127.0.0.1:1 +FAILED ConnectionError", res.output, re.MULTILINE)


def test_kubeconfig_that_is_not_yaml_is_one_line_exit_2(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nclusters: [\n")
    from kfp_gpu.cli import app as kfp_gpu_app

    res = CliRunner().invoke(kfp_gpu_app, ["doctor", "--kubeconfig", str(kc)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "is not a kubeconfig: invalid YAML" in res.output
    assert "Traceback" not in res.output


def test_bad_request_is_a_usage_error(tmp_path):
    with FakeCluster() as c:
        res = run(c, tmp_path, "--gpu", "gpu:1.5")
        assert res.exit_code == 2 and "accepted" in res.output
        assert c.requests == []
