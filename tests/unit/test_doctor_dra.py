"""kfp-gpu doctor and Dynamic Resource Allocation, against the Kubernetes
API double (tests/doubles/k8s_cluster.py) serving resource.k8s.io/v1 DeviceClasses and
ResourceSlices shaped as NVIDIA's DRA driver publishes them (tests/doubles/nvidia_dra.py),
with the real RBAC manifests. The fake objects themselves validate strictly against
Kubernetes 1.36's schema."""

from __future__ import annotations

import copy
import re

import kubernetes_validate
import pytest
import yaml

from kfp_gpu import gpu
from kfp_gpu.cluster import doctor
from tests.doubles import nvidia_dra
from tests.doubles.k8s_cluster import FakeCluster
from tests.support.doctor_double import dra_nodes, run


def dra_objects(*slices: dict) -> dict:
    return {"deviceclasses": nvidia_dra.device_classes(), "resourceslices": list(slices)}


SLICES = (nvidia_dra.h100_node_slice("dra-h100-01"),
          nvidia_dra.mig_node_slice("dra-h100-mig-01"))


def test_the_fake_driver_objects_are_valid_kubernetes_1_36_objects():
    for obj in (*nvidia_dra.device_classes(), *SLICES):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)
    assert len(SLICES[0]["spec"]["devices"]) == 8 and len(SLICES[1]["spec"]["devices"]) == 7
    assert SLICES[1]["spec"]["devices"][0]["name"] == "gpu-0-mig-1g10gb-19-0"


@pytest.mark.parametrize("request_text, fits", [
    ("dra:mig=1g.10gb", ["dra-h100-mig-01"]),
    ("dra:gpu=8", ["dra-h100-01"]),
    ("dra:gpu=1,product=H100,memory>=79Gi", ["dra-h100-01"]),
    ("dra:mig=3g.40gb", []),
    ("dra:gpu=9", []),
])
def test_the_request_fits_where_the_drivers_devices_match(tmp_path, rbac_objects,
                                                         request_text, fits):
    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra=dra_objects(*SLICES)) as c:
        res = run(c, tmp_path, "--gpu", request_text)
    assert res.exit_code == (0 if fits else 1), res.output
    if fits:
        assert f"request fits on: {', '.join(fits)}" in res.output
    else:
        assert f"PROBLEM: no node can run a pod with a claim '{gpu.parse(request_text)}'" \
            in res.output
        assert "DRA: 0 device(s) of gpu.nvidia.com match" in res.output or \
            "DRA: 8 device(s)" in res.output
    assert re.search(r"resource.k8s.io/v1 +served", res.output)
    assert re.search(r"DeviceClass mig.nvidia.com +present", res.output)


def test_an_80gb_h100_has_less_than_80gi(tmp_path, rbac_objects):
    """memory>=80Gi is 81920 MiB; an H100 80GB HBM3 has 81559 MiB: doctor says so before a
    Worker waits forever (80G, decimal, is 76294 MiB and fits)."""
    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra=dra_objects(*SLICES)) as c:
        assert run(c, tmp_path, "--gpu", "dra:gpu=1,memory>=80Gi").exit_code == 1
        assert run(c, tmp_path, "--gpu", "dra:gpu=1,memory>=80G").exit_code == 0


def test_a_cluster_without_dra_would_drop_the_claims_silently(tmp_path, rbac_objects):
    with FakeCluster(rbac_objects=rbac_objects) as c:
        res = run(c, tmp_path, "--gpu", "dra:gpu=1")
        assert res.exit_code == 1
        assert re.search(r"resource.k8s.io/v1 +NOT served", res.output)
        assert "drops a pod's resourceClaims and the pod runs WITHOUT a GPU, silently" in \
            res.output
        # a device-plugin request on the same cluster: the DRA table, no problem from it
        res = run(c, tmp_path, "--gpu", "gpu:1")
        assert res.exit_code == 0 and "resourceClaims" not in res.output


def test_driver_missing_and_feature_gates(tmp_path, rbac_objects):
    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra={"deviceclasses": [], "resourceslices": []}) as c:
        res = run(c, tmp_path, "--gpu", "dra:mig=1g.10gb")
        assert res.exit_code == 1
        assert "DeviceClass mig.nvidia.com is missing" in res.output
        assert "no node publishes ResourceSlices of gpu.nvidia.com" in res.output
    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra=dra_objects(*SLICES)) as c:
        res = run(c, tmp_path, "--gpu", "dra:gpu=1,sharing=mps,threads=50")
        assert res.exit_code == 0, res.output
        assert "alpha feature gate MPSSupport" in res.output


def test_device_plugin_and_dra_driver_on_one_node_are_warned(tmp_path, rbac_objects):
    both = nvidia_dra.h100_node_slice("dgx-h100-01")  # that node has nvidia.com/gpu: 8 too
    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra=dra_objects(*SLICES, both)) as c:
        res = run(c, tmp_path, "--gpu", "gpu:1")
        assert res.exit_code == 0, res.output
        assert "warning: node(s) dgx-h100-01 run both NVIDIA's device plugin" in res.output
        assert "dra: 8 gpu" in res.output and "dra: 7 mig 1g.10gb" in res.output


def test_the_launcher_role_grants_what_a_dra_job_needs(tmp_path, rbac_objects):
    """The Role of manifests/rbac reviewed for resourceclaimtemplates; without the rule a
    dra request is a problem, any other a warning."""
    rules = [o for o in rbac_objects if o["kind"] == "Role"]
    assert any("resourceclaimtemplates" in r["resources"] for r in rules[0]["rules"])
    without = copy.deepcopy(rbac_objects)
    for o in without:
        if o["kind"] == "Role":
            o["rules"] = [r for r in o["rules"] if "resourceclaimtemplates" not in r["resources"]]
    with FakeCluster(rbac_objects=without, nodes=dra_nodes(), dra=dra_objects(*SLICES)) as c:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--gpu", "dra:mig=1g.10gb")
        assert res.exit_code == 1
        assert "may not create resourceclaimtemplates" in res.output
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--gpu", "gpu:1")
        lines = [ln for ln in res.output.splitlines() if "resourceclaimtemplates" in ln
                 and "may not" in ln]
        assert lines and all(ln.startswith("warning:") and "dra: requests" in ln
                             for ln in lines), res.output


def test_pure_fit_check():
    node = doctor.Node("n", dra_devices=[
        {"name": "gpu-0", "type": "gpu", "profile": "", "product": nvidia_dra.H100,
         "memory_mib": nvidia_dra.H100_MIB}])
    facts = doctor.ClusterFacts(nodes=[node])
    facts.dra.served, facts.dra.classes, facts.dra.slices = True, ("gpu.nvidia.com",), 1
    rep = doctor.build_report(facts, doctor.needs_from_request(gpu.parse("dra:gpu=1,product=H100")))
    assert rep.satisfied_by == ["n"] and rep.ok
    rep = doctor.build_report(facts, doctor.needs_from_request(gpu.parse("dra:gpu=1,product=A100")))
    assert rep.satisfied_by == [] and not rep.ok


def test_a_dra_trainjob_needs_the_dra_runtime():
    """backend trainjob with a dra request: the runtime of manifests/trainer-dra."""
    from kfp_gpu.cluster.doctor import backends as db
    from kfp_gpu.cluster.doctor.model import Runtime, RuntimeFacts
    from tests.support.doctor_double import IMAGE, crds
    from tests.support.kustomize import MANIFESTS, kustomize

    def rendered(overlay: str) -> dict:
        return kustomize(MANIFESTS / overlay)[0]

    plain = RuntimeFacts([Runtime.from_api(rendered("trainer"))], listed=True)
    needs = doctor.needs_from_request(gpu.parse("dra:mig=1g.10gb"), mpi=True)
    needs.backend = "trainjob"
    facts = doctor.ClusterFacts(crds=crds(), runtimes=plain)
    facts.dra.served, facts.dra.classes, facts.dra.slices = True, ("mig.nvidia.com",), 1
    rep = doctor.build_report(facts, needs)
    assert ("backend trainjob: ClusterTrainingRuntime kfp-gpu-horovod-dra not installed "
            "(MPI runtimes here: kfp-gpu-horovod); apply manifests/trainer-dra") in rep.problems
    facts.runtimes = RuntimeFacts([Runtime.from_api(rendered("trainer-dra"))], listed=True)
    rep = doctor.build_report(facts, needs)
    assert not [p for p in rep.problems if "backend trainjob" in p], rep.problems
    assert db.runtime_status(facts.runtimes, IMAGE, "kfp-gpu-horovod-dra") == f"ok ({IMAGE})"


def test_a_pipeline_compiled_with_a_dra_request_is_checked_for_it(tmp_path):
    """doctor --pipeline on `kfp-gpu compile --gpu dra:... --only resnet-horovod` output:
    the compiled worker_gpu constant is the request."""
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app

    out = CliRunner().invoke(app, ["compile", "--gpu", "dra:mig=1g.10gb", "--only",
                                   "resnet-horovod", "-o", str(tmp_path / "c")])
    assert out.exit_code == 0, out.output
    spec = list(yaml.safe_load_all((tmp_path / "c/pipelines/resnet_horovod.yaml").read_text()))
    needs = doctor.needs_from_pipeline(spec)
    assert needs.request == gpu.parse("dra:mig=1g.10gb") and needs.mpi
    facts = doctor.ClusterFacts(nodes=[])
    facts.dra.served = False
    rep = doctor.build_report(facts, needs)
    assert any("runs WITHOUT a GPU" in p for p in rep.problems)
