"""The ``dra`` GPU request kind: text form and refusals, the ResourceClaimTemplate
it builds, the MPIJob Workers' and TrainJob nodes' claims, KFP tasks, the memory cap.

Schemas: the ResourceClaimTemplate and the pods are validated strictly against Kubernetes
1.36's own OpenAPI schema (kubernetes-validate's ``v1.36.0`` set, generated from
kubernetes/kubernetes api/openapi-spec at that release: resource.k8s.io/v1 and core/v1 as
k8s.io/api v0.36.x types.go declare them); the MPIJob, TrainJob and the DRA runtime against
the upstream CRDs read in place (tests/support/upstream_crds.py). The real API server's
server-side checks (CEL compiled, claims allocated) are the cluster tests' (tests/cluster).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from kfp_gpu import gpu
from kfp_gpu.gpu import claim, memory_cap, render
from kfp_gpu.mpi.spec import claims, mpijob, trainjob
from tests.support import upstream_crds
from tests.support.kustomize import kustomize
from tests.support.merge_patch import smp
from tests.support.mpijob_options import options

K8S = "1.36.0"
ROOT = Path(__file__).resolve().parents[2]
FORMS = {  # the brief's forms -> canonical text
    "dra:gpu=2": "dra:gpu=2",
    "dra:mig=1g.10gb": "dra:mig=1g.10gb",
    "dra:gpu=1,product=H100,memory>=80Gi": "dra:gpu=1,product=H100,memory>=80Gi",
    "dra:gpu=1,sharing=timeslicing,interval=long":
        "dra:gpu=1,sharing=time-slicing,interval=Long",
    "dra:gpu=1,sharing=mps,threads=50,pinned=10Gi": "dra:gpu=1,sharing=mps,threads=50,pinned=10Gi",
    "dra:mig=3G.40GB,model=h100-80gb,sharing=mps": "dra:mig=3g.40gb,model=H100-80GB,sharing=mps",
}


def k8s_validate(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S, strict=True)


@pytest.mark.parametrize("text", list(FORMS))
def test_forms_parse_round_trip_and_ask_for_no_extended_resource(text):
    r = gpu.parse(text)
    assert r.to_text() == FORMS[text] and gpu.parse(r.to_text()) == r
    frag = r.pod_fragment()
    assert frag["resources"] == {"limits": {}, "requests": {}}
    assert frag["nodeSelector"] == {}  # product= is a device selector here, not a GFD label
    assert frag["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                    "effect": "NoSchedule"}]
    assert r.gpus_per_pod == (2 if text == "dra:gpu=2" else 1)


@pytest.mark.parametrize("text, says", [
    ("dra:gpu=0", "gpu count must be an integer >= 1"),
    ("dra:gpu=1.5", "gpu count must be an integer >= 1"),
    ("dra:mig=1g.11gb", "unknown MIG profile '1g.11gb'; accepted: "),
    ("dra:mig=7g.80gb,model=A100-40GB", "not valid on A100-40GB; accepted: "),
    ("dra:mig=1g.10gb.shared", "is a device-plugin resource name"),
    ("dra:gpu=1,model=H100-80GB", "model= checks a MIG profile"),
    ("dra:tpu=1", "names no device"),
    ("dra:gpu=1,interval=Long", "interval= goes with sharing=time-slicing"),
    ("dra:gpu=1,sharing=time-slicing,interval=Forever", ("interval must be one of Default, "
     "Short, Medium, Long")),
    ("dra:mig=1g.10gb,sharing=time-slicing,interval=Short", "no time-slicing interval"),
    ("dra:gpu=1,threads=50", "threads= and pinned= go with sharing=mps"),
    ("dra:gpu=1,sharing=mps,threads=0", "threads (percent) must be an integer 1..100"),
    ("dra:gpu=1,sharing=mps,pinned=10GiB", "pinned must be a quantity"),
    ("dra:gpu=1,memory>=0", "memory>= must be at least 1Mi"),
    ("dra:gpu=1,sharing=spatial", "sharing must be time-slicing or mps"),
    ("dra:gpu=1,product=H100'||true", "product must be letters"),
    ("dra:gpu=1,replicas=4", "options accepted for dra: class, interval, memory>=, model, pinned"),
])
def test_bad_dra_requests_are_refused_in_one_line_naming_what_is_accepted(text, says):
    with pytest.raises(ValueError) as e:
        gpu.parse(text)
    msg = str(e.value)
    assert says in msg and "\n" not in msg
    assert "accepted" in msg


def test_claim_template_validates_against_kubernetes_1_36_and_says_what_upstream_names():
    r = gpu.parse("dra:gpu=2,product=H100,memory>=80Gi,sharing=time-slicing,interval=Long")
    t = claim.template(r, "job-gpu", "ml", labels={"a": "b"},
                       owner={"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                              "name": "job", "uid": "u-1"})
    k8s_validate(t)
    assert (t["apiVersion"], t["kind"]) == ("resource.k8s.io/v1", "ResourceClaimTemplate")
    (req,) = t["spec"]["spec"]["devices"]["requests"]
    assert req["name"] == "gpu"
    ex = req["exactly"]
    assert (ex["deviceClassName"], ex["allocationMode"], ex["count"]) == (
        "gpu.nvidia.com", "ExactCount", 2)
    assert [s["cel"]["expression"] for s in ex["selectors"]] == [
        "device.attributes['gpu.nvidia.com'].productName.contains('H100')",
        ("'memory' in device.capacity['gpu.nvidia.com'] && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")]
    (cfg,) = t["spec"]["spec"]["devices"]["config"]
    assert cfg == {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}}}


def test_mig_and_mps_claims():
    mig = claim.claim_spec(gpu.parse("dra:mig=1g.10gb"))
    ex = mig["devices"]["requests"][0]["exactly"]
    assert ex["deviceClassName"] == "mig.nvidia.com" and ex["count"] == 1
    assert ex["selectors"] == [{"cel": {
        "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
    assert "config" not in mig["devices"]
    mps = claim.claim_spec(gpu.parse("dra:mig=3g.40gb,sharing=mps,threads=50,pinned=10Gi"))
    assert mps["devices"]["config"][0]["opaque"]["parameters"] == {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                                                     "defaultPinnedDeviceMemoryLimit": "10Gi"}}}
    for spec in (mig, mps):
        k8s_validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                      "metadata": {"name": "c"}, "spec": spec})
    with pytest.raises(ValueError, match="built for 'dra' requests"):
        claim.claim_spec(gpu.parse("mig:1g.10gb"))


def test_a_bad_claim_fails_the_schema():
    """The gate works: a misspelt field is refused by the 1.36 schema."""
    t = claim.template(gpu.parse("dra:gpu=1"), "t", "ml")
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClass"] = "gpu.nvidia.com"
    with pytest.raises(kubernetes_validate.ValidationError):
        k8s_validate(t)


@pytest.mark.parametrize("text", ["dra:mig=1g.10gb", "dra:gpu=2,sharing=mps,pinned=10Gi"])
def test_mpijob_workers_claim_their_gpus_from_the_jobs_template(text):
    opts = options(gpu=text)
    job = mpijob.build(opts)
    upstream_crds.validate(job, strict=True)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    name = f"{opts.name}-gpu"
    assert worker["spec"]["resourceClaims"] == [{"name": "gpu",
                                                 "resourceClaimTemplateName": name}]
    (c,) = worker["spec"]["containers"]
    assert c["resources"]["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in json.dumps(c["resources"])
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["KFP_GPU_KIND"] == ("dra" if "mig" in text else "dra-shared")
    assert job["spec"]["slotsPerWorker"] == opts.slots() == gpu.parse(text).gpus_per_pod
    k8s_validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                  "template": worker})
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert "resourceClaims" not in launcher
    # the template the launcher will create, from the created job (with its uid)
    created = {**job, "metadata": {**job["metadata"], "uid": "uid-1"}}
    t = claims.template_for(created)
    k8s_validate(t)
    assert t["metadata"]["name"] == name and t["metadata"]["namespace"] == "ml"
    assert t["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": opts.name,
        "uid": "uid-1", "controller": False, "blockOwnerDeletion": False}]
    assert t["spec"] == {"spec": claim.claim_spec(gpu.parse(text))}


def test_jobs_without_dra_carry_no_claims():
    job = mpijob.build(options(gpu="gpu:2"))
    assert claims.TEMPLATE_ANNOTATION not in job["metadata"].get("annotations", {})
    assert claims.template_for(job) is None
    assert "resourceClaims" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]


def rendered(overlay: str) -> dict:
    (doc,) = kustomize(ROOT / "manifests" / overlay)
    return doc


def test_trainjob_nodes_claim_through_the_dra_runtime():
    opts = options(gpu="dra:mig=1g.10gb")
    job = trainjob.build(opts)
    upstream_crds.validate(job)
    assert job["spec"]["runtimeRef"]["name"] == claims.DRA_RUNTIME
    assert job["spec"]["trainer"]["resourcesPerNode"]["claims"] == [{"name": "gpu"}]
    runtime = rendered("trainer-dra")
    upstream_crds.validate(runtime)
    assert runtime["metadata"]["name"] == claims.DRA_RUNTIME
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = copy.deepcopy(rjob["template"]["spec"]["template"])
        assert pod["spec"]["resourceClaims"] == [
            {"name": "gpu", "resourceClaimTemplateName": claims.DRA_RUNTIME_TEMPLATE}]
        # the node container as Trainer makes it: resourcesPerNode applied
        (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        c["resources"] = smp(c.get("resources", {}), job["spec"]["trainer"]["resourcesPerNode"])
        k8s_validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                      "template": pod})
    t = claims.template_for({**job, "metadata": {**job["metadata"], "uid": "u"}})
    assert t["metadata"]["name"] == claims.DRA_RUNTIME_TEMPLATE
    assert t["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    # the runtime is the shipped one plus the claims: nothing else differs
    shipped = rendered("trainer")
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        del rjob["template"]["spec"]["template"]["spec"]["resourceClaims"]
    assert runtime["spec"] == shipped["spec"]


def test_an_explicit_runtime_is_kept():
    job = trainjob.build(options(gpu="dra:gpu=1"), runtime="my-dra-runtime")
    assert job["spec"]["runtimeRef"]["name"] == "my-dra-runtime"


def test_kfp_tasks_refuse_dra_without_the_sdk_claim_api():
    from kfp import kubernetes

    assert not hasattr(kubernetes, "add_resource_claim")  # kfp-kubernetes 2.17
    from pipelines import imdb_lstm

    with pytest.raises(ValueError) as e:
        imdb_lstm.build("dra:mig=1g.10gb")
    msg = str(e.value)
    assert "kubeflow/pipelines PR 14243" in msg and "add_resource_claim" in msg
    assert "\n" not in msg


def test_kfp_tasks_use_the_sdk_claim_api_when_it_exists(monkeypatch):
    """kfp-kubernetes with PR 14243 (no release has it yet): its own function is called
    with the template name; nothing is patched behind the SDK's back."""
    from kfp import dsl, kubernetes

    calls = []
    monkeypatch.setattr(kubernetes, "add_resource_claim",
                        lambda task, resource_claim_template_name: calls.append(
                            resource_claim_template_name) or task, raising=False)

    @dsl.component
    def noop():
        pass

    with pytest.warns(gpu.KfpCannotExpressWarning, match="must exist in the run's"):
        @dsl.pipeline
        def p():  # built when decorated
            gpu.parse("dra:mig=1g.10gb").apply_to_task(noop())

    assert calls == [render.task_template_name(gpu.parse("dra:mig=1g.10gb"))]
    assert calls[0].startswith("kfp-gpu-dra-")


def test_compile_refuses_in_one_line_and_resnet_horovod_hands_the_request_to_the_workers(
        tmp_path):
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app

    out = CliRunner().invoke(app, ["compile", "--gpu", "dra:mig=1g.10gb", "-o",
                                   str(tmp_path / "all")])
    assert out.exit_code == 2 and "PR 14243" in out.output
    assert not (tmp_path / "all").exists()
    out = CliRunner().invoke(app, ["compile", "--gpu", "dra:mig=1g.10gb", "--only",
                                   "resnet-horovod", "-o", str(tmp_path / "one")])
    assert out.exit_code == 0, out.output
    ir = yaml.safe_load((tmp_path / "one" / "pipelines" / "resnet_horovod.yaml").read_text())
    task = ir["root"]["dag"]["tasks"]["train-resnet-horovod"]
    assert task["inputs"]["parameters"]["worker_gpu"]["runtimeValue"]["constant"] == \
        "dra:mig=1g.10gb"
    # no device-plugin resource on the task: the request reaches the Workers as their claim
    assert "resources" not in ir["deploymentSpec"]["executors"]["exec-train-resnet-horovod"][
        "container"]


def test_memory_cap_follows_the_claim():
    env = gpu.parse("dra:mig=1g.10gb").env()
    assert env == {"KFP_GPU_KIND": "dra", "KFP_GPU_SHARE": "1",
                   "KFP_GPU_MEMORY_MIB": str(10 * 10**9 // 2**20)}
    # H100's 1g.10gb as NVML reports it (9984 MiB): capped at the profile minus headroom
    p = memory_cap.plan(env, total_mib=9984)
    assert p["limit_mib"] == 9536 - memory_cap.DEFAULT_RESERVE_MIB
    whole = memory_cap.plan(gpu.parse("dra:gpu=2,memory>=80Gi").env(), total_mib=81559)
    assert whole["limit_mib"] is None and "whole device" in whole["reason"]
    mps = memory_cap.plan(gpu.parse("dra:gpu=1,sharing=mps,pinned=10Gi").env(), total_mib=81559)
    assert mps["limit_mib"] == 10240 - memory_cap.DEFAULT_RESERVE_MIB
    ts = gpu.parse("dra:gpu=1,sharing=time-slicing").env()
    assert ts["KFP_GPU_KIND"] in memory_cap.SHARED_KINDS and "KFP_GPU_MEMORY_MIB" not in ts


def test_ranks_get_the_mps_pipe_the_driver_injects(tmp_path):
    """sshd gives the ranks a fresh environment; the Worker's start hands the MPS pipe
    directory NVIDIA's DRA driver injects (CDI) on to them (kfp_gpu.training.worker_env)."""
    from kfp_gpu.training import worker_env

    env = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps", "HOME": str(tmp_path), "X": "1"}
    written = worker_env.write_worker_env(tmp_path / "env", env)
    assert written == {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps"}


def test_the_command_line_refuses_more_devices_than_a_node_holds():
    from kfp_gpu.dsl import k8s_rules

    with pytest.raises(ValueError, match="can never be scheduled"):
        k8s_rules.gpu_request(f"dra:gpu={k8s_rules.MAX_GPUS_PER_POD + 1}")
    assert k8s_rules.gpu_request("dra:gpu=8").count == 8
