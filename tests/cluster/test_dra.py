"""(issue 29 item 4) GPUs through Dynamic Resource Allocation on the real control plane:
kube-apiserver, kube-controller-manager (its resourceclaim controller makes one
ResourceClaim per pod from the template; the garbage collector) and kube-scheduler
(its DynamicResources plugin allocates and reserves claims) of Kubernetes v1.36.3, pods
driven by kwok, the MPIJob through the real mpi-operator v0.8.2.

NVIDIA's DRA driver does not run here (kwok nodes have no kubelet): its DeviceClasses and
ResourceSlices are created as the driver would publish them (tests/doubles/nvidia_dra.py:
kubernetes-sigs/dra-driver-nvidia-gpu @v0.4.1 chart templates and
cmd/gpu-kubelet-plugin device names/attributes/capacity) for two kwok nodes: an 8-GPU
H100 node and an H100 split into seven 1g.10gb MIG devices. The nodes carry the GPU taint
``nvidia.com/gpu:NoSchedule`` (which every GPU request tolerates), so no other test's pods
land there.

Upstream behaviour each test relies on (kubernetes v1.36.3):
- pkg/controller/resourceclaim/controller.go: for a pod's ``resourceClaims`` entry with
  ``resourceClaimTemplateName`` it creates a ResourceClaim ``<pod>-<claim>-<random>``
  owned by the pod (controller reference) and records it in the pod's
  ``status.resourceClaimStatuses``;
- pkg/scheduler/framework/plugins/dynamicresources: a pod is scheduled only where its
  claims can be allocated from the ResourceSlices; the claim's ``status.allocation`` and
  ``status.reservedFor`` (the pod) are written before binding; otherwise the pod stays
  Pending with FailedScheduling ``... cannot allocate all claims``;
- pkg/controller/garbagecollector: the template (owned by the job) and the claims (owned
  by their pods) go when their owners go;
- kube-apiserver validation of resource.k8s.io/v1 (pkg/apis/resource/validation): CEL
  selectors are compiled (k8s.io/dynamic-resource-allocation v0.36.3 cel), so a typo is
  refused at apply time.

Also here: every ``dra`` form's template, MPIJob and TrainJob server-side applied
(strict, dry run), the DRA runtime of manifests/trainer-dra, tier 2's TrainJob through it,
and ``kfp-gpu doctor`` reading the real slices.

Issue 37 item 4 (kfp_gpu/mpi/launch/claims.py): a template that cannot be made once the job
exists -- kube-apiserver's RBAC 403 for a ServiceAccount whose Role lacks
``resourceclaimtemplates`` create, another request's template that appeared after the
check, a client timeout -- deletes the job (Foreground) and ends the launcher with one
line; two TrainJobs on the runtime's per-namespace template both own it, and the first
one's deletion leaves it (pkg/controller/garbagecollector ``attemptToDeleteItem``: a
dependent with a solid owner is not collected; the gone owner's reference is patched away)
to the second, suspended until then, whose pods then claim from it; kube-apiserver refuses
the owner patch with a stale ``resourceVersion`` (409); a ``dra`` MPIJob runs under the
project's Role (manifests/rbac) instead of the admin client.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from kfp_gpu import gpu
from kfp_gpu.gpu import claim
from kfp_gpu.mpi.launch import attach, jobs_api
from kfp_gpu.mpi.launch import claims as launch_claims
from kfp_gpu.mpi.launch.records import PendingTimeout
from kfp_gpu.mpi.spec import backends, claims, mpijob, trainjob
from testcluster import nodes
from tests.cluster import jobs, kube
from tests.cluster.access import SA, install_rbac, sa_client
from tests.cluster.doctor_cli import doctor
from tests.cluster.objects import MANIFESTS, job_options, server_apply
from tests.doubles import nvidia_dra
from tests.support.template_timeouts import template_creates_time_out

DRA_NODES = {"dra-h100-01": nvidia_dra.h100_node_slice,
             "dra-h100-mig-01": nvidia_dra.mig_node_slice}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
FORMS = ("dra:gpu=2", "dra:mig=1g.10gb", "dra:gpu=1,product=H100,memory>=79Gi",
         "dra:gpu=1,sharing=time-slicing,interval=Long",
         "dra:gpu=1,sharing=mps,threads=50,pinned=10Gi", "dra:mig=3g.40gb,sharing=mps")


def dra_node(name: str) -> dict:
    """A kwok node for DRA only: the double's CPU node renamed, no extended resources,
    the GPU taint."""
    cpu = next(n for n in nodes.double_nodes() if n["metadata"]["name"] == "cpu-01")
    n = copy.deepcopy(cpu)
    n["metadata"]["name"] = name
    n["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = name
    n.setdefault("spec", {})["taints"] = [GPU_TAINT]
    return nodes.kwok_node(n)


@pytest.fixture(scope="module")
def dra_cluster(plane):
    """DeviceClasses, two DRA nodes and their ResourceSlices; removed afterwards."""
    made = [*nvidia_dra.device_classes(), *(dra_node(n) for n in DRA_NODES),
            *(make(n) for n, make in DRA_NODES.items())]
    plane.apply(made)
    plane.kubectl("wait", "--for=condition=Ready", "--timeout=120s",
                  *(f"node/{n}" for n in DRA_NODES))
    yield made
    for obj in reversed(made):
        plane.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"],
                      "--ignore-not-found", "--wait=false", check=False)


def claims_of(api, ns: str) -> list[dict]:
    return kube.custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", ns, "resourceclaims")["items"]


def template(api, ns: str, name: str) -> dict | None:
    return kube.get_custom(api, "resource.k8s.io", "v1", ns, "resourceclaimtemplates", name)


worker_pods = jobs.worker_pods


def start_owned(client, api, namespace: str, name: str, tmp_path, **job_args):
    """Start a ``dra:mig=1g.10gb`` component job through ``client`` (the admin or a
    ServiceAccount's); wait for the MPIJob and its claim template and check the job owns
    the template alone. Returns the running :class:`jobs.Launch`."""
    job = jobs.component_job(namespace, name, gpu="dra:mig=1g.10gb", **job_args)
    run = jobs.Launch(client, job, tmp_path / "record.json")
    run.start()
    uid = kube.wait_for(lambda: (jobs.mpijob(api, namespace, name) or {}).get(
        "metadata", {}).get("uid"), 60, "the MPIJob")
    t = kube.wait_for(lambda: template(api, namespace, claims.template_name(name)), 60,
                      "the claim template")
    assert [o["uid"] for o in t["metadata"]["ownerReferences"]] == [uid]
    return run


def test_mig_claims_are_allocated_reserved_and_the_workers_run(plane, api, namespace,
                                                               dra_cluster, tmp_path):
    name = "resnet-dra"
    run = start_owned(api, api, namespace, name, tmp_path, workers=2)

    def running():
        pods = worker_pods(api, namespace, name)
        return pods if len(pods) == 2 and all(p.status.phase == "Running" for p in pods) \
            else None
    pods = kube.wait_for(running, 180, "both Workers Running")
    assert {p.spec.node_name for p in pods} == {"dra-h100-mig-01"}
    made = {c["metadata"]["name"]: c for c in claims_of(api, namespace)}
    devices = set()
    for p in pods:
        (st,) = p.status.resource_claim_statuses
        c = made[st.resource_claim_name]
        assert c["metadata"]["ownerReferences"][0]["name"] == p.metadata.name
        (res,) = c["status"]["allocation"]["devices"]["results"]
        assert (res["driver"], res["pool"]) == ("gpu.nvidia.com", "dra-h100-mig-01")
        assert "-mig-1g10gb-" in res["device"]
        devices.add(res["device"])
        assert [r["name"] for r in c["status"]["reservedFor"]] == [p.metadata.name]
    assert len(devices) == 2  # one MIG device each
    jobs.end_launcher(api, namespace, name, "succeed")
    result, error = run.outcome()
    assert error is None and result.status == "Succeeded", error


def test_an_unsatisfiable_claim_times_out_with_the_schedulers_reason(plane, api, namespace,
                                                                    dra_cluster, tmp_path):
    """No node publishes a 3g.40gb MIG device: the Workers stay Pending, the launcher fails
    with the scheduler's words and deletes the job; the template goes with it."""
    name = "resnet-dra-pending"
    job = jobs.component_job(namespace, name, gpu="dra:mig=3g.40gb", workers=2)
    run = jobs.Launch(api, job, tmp_path / "record.json", pending_timeout_s=15)
    run.start()
    _, error = run.outcome(timeout=120)
    assert isinstance(error, PendingTimeout), error
    text = f"{error.reason}: {error.message}"
    # kube-scheduler's DynamicResources plugin in its own words, with the pod named
    assert "nodes are available" in text and "cannot allocate all claims" in text, text
    assert "resnet-dra-pending-worker-" in text
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 60, "MPIJob deleted")
    kube.wait_for(lambda: template(api, namespace, claims.template_name(name)) is None, 60,
                  "template collected")


def test_deleting_the_job_removes_its_claims_and_template(plane, api, namespace,
                                                          dra_cluster, tmp_path):
    name = "resnet-dra-gc"
    job = jobs.component_job(namespace, name, gpu="dra:gpu=2", workers=2)
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    kube.wait_for(lambda: len([p for p in worker_pods(api, namespace, name)
                               if p.status.phase == "Running"]) == 2 or None, 180,
                  "both Workers Running")
    assert len(claims_of(api, namespace)) == 2
    kube.custom(api).delete_namespaced_custom_object(
        "kubeflow.org", "v2beta1", namespace, "mpijobs", name,
        body={"propagationPolicy": "Foreground"})
    kube.wait_for(lambda: not claims_of(api, namespace) or None, 90, "claims removed")
    kube.wait_for(lambda: template(api, namespace, claims.template_name(name)) is None, 60,
                  "template removed")
    run.outcome(timeout=120)


@pytest.fixture(scope="module")
def dra_runtime(tier2):
    """ClusterTrainingRuntime kfp-gpu-horovod-dra (manifests/trainer-dra) on the plane for
    this module, deleted at its end."""
    docs = [d for d in yaml.safe_load_all(tier2.kubectl(
        "kustomize", str(MANIFESTS / "trainer-dra")).stdout) if d]
    tier2.apply(docs)
    yield docs[0]["metadata"]["name"]
    tier2.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false",
                  input=yaml.safe_dump_all(docs))


def test_trainjob_nodes_claim_mig_devices_through_the_dra_runtime(tier2, api, namespace,
                                                                  dra_cluster, dra_runtime,
                                                                  tmp_path):
    """Tier 2: the TrainJob names the DRA runtime; JobSet's node and launcher pods (the
    launcher is rank host 0) each get a claim from the namespace's template, allocated on
    the MIG node; the job completes; deleting it removes claims and template."""
    name = "resnet-tj-dra"
    job = jobs.component_job(namespace, name, gpu="dra:mig=1g.10gb", workers=2,
                             backend=backends.TRAINJOB)
    assert job["spec"]["runtimeRef"]["name"] == dra_runtime == claims.DRA_RUNTIME
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    launcher = jobs.launcher_pod(api, namespace, name, backend=backends.TRAINJOB)
    t = template(api, namespace, claims.DRA_RUNTIME_TEMPLATE)
    assert t["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    sel = f"jobset.sigs.k8s.io/jobset-name={name}"

    def running():
        pods = kube.pods(api, namespace, sel)
        return pods if len(pods) == 2 and all(p.status.phase == "Running" for p in pods) \
            else None
    pods = kube.wait_for(running, 180, "node and launcher pods Running")
    assert {p.spec.node_name for p in pods} == {"dra-h100-mig-01"}
    assert launcher.metadata.name in {p.metadata.name for p in pods}
    made = claims_of(api, namespace)
    assert len(made) == 2 and all(
        c["status"]["allocation"]["devices"]["results"][0]["pool"] == "dra-h100-mig-01"
        and c["status"]["reservedFor"] for c in made)
    jobs.end_launcher(api, namespace, name, "succeed", backend=backends.TRAINJOB)
    result, error = run.outcome()
    assert error is None and result.status == "Succeeded", error
    kube.custom(api).delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name,
        body={"propagationPolicy": "Foreground"})
    kube.wait_for(lambda: not claims_of(api, namespace) or None, 90, "claims removed")
    kube.wait_for(lambda: template(api, namespace, claims.DRA_RUNTIME_TEMPLATE) is None, 60,
                  "template removed")


def test_doctor_reads_the_real_slices(plane, api, namespace, dra_cluster):
    """kfp-gpu doctor on the real API server: resource.k8s.io/v1 served, the DeviceClasses,
    the driver's slices per node, and where a claim fits."""
    install_rbac(plane, namespace)
    r = doctor(plane, "--namespace", namespace, "--service-account", SA,
               "--gpu", "dra:mig=1g.10gb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "request fits on: dra-h100-mig-01" in r.stdout
    assert "dra: 7 mig 1g.10gb" in r.stdout and "dra: 8 gpu" in r.stdout
    r = doctor(plane, "--namespace", namespace, "--service-account", SA,
               "--gpu", "dra:gpu=1,memory>=80Gi")  # an 80GB H100 has 81559 MiB < 80Gi
    assert r.returncode == 1, r.stdout + r.stderr
    assert "DRA: 0 device(s) of gpu.nvidia.com match" in r.stdout


@pytest.mark.parametrize("form", FORMS)
def test_every_dra_object_is_accepted_with_its_cel_compiled(plane, namespace,
                                                            trainer_crds, form):
    """Server-side apply, strict, dry run: the claim template (kube-apiserver compiles its
    CEL selectors: k8s.io/dynamic-resource-allocation v0.36.3 cel), the MPIJob whose
    Workers claim from it, the TrainJob on the DRA runtime."""
    opts = job_options(namespace, "gpu", rdma=False).replace(gpu=form)
    docs = [claim.template(gpu.parse(form), "t", namespace), mpijob.build(opts),
            trainjob.build(opts)]
    r = server_apply(plane, docs, namespace)
    assert r.returncode == 0, r.stderr


def test_a_cel_typo_is_refused_by_the_api_server(plane, namespace):
    """The check can fail: kube-apiserver compiles the selectors."""
    t = claim.template(gpu.parse("dra:gpu=1,product=H100"), "t", namespace)
    sel = t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]
    sel["expression"] = sel["expression"].replace("contains", "containz")
    r = server_apply(plane, [t], namespace)
    assert r.returncode != 0 and "undeclared reference to 'containz'" in r.stderr


def test_the_dra_runtime_and_the_shipped_objects_are_accepted(plane, trainer_crds,
                                                              dra_cluster, dra_runtime):
    # the module's fixtures own (and delete) what this applies again
    docs = [d for d in yaml.safe_load_all(plane.kubectl(
        "kustomize", str(MANIFESTS / "trainer-dra")).stdout) if d]
    docs += [*nvidia_dra.device_classes(), *(make(n) for n, make in DRA_NODES.items())]
    r = server_apply(plane, docs)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------- issue 37 item 4: no orphans
def test_a_dra_mpijob_runs_under_the_projects_role(plane, api, namespace, dra_cluster,
                                                   tmp_path):
    """The launcher as the ServiceAccount of manifests/rbac (not the admin): the check's GET,
    the template's create, the MPIJob; the Workers claim MIG devices and run."""
    install_rbac(plane, namespace)
    client = sa_client(plane, namespace, tmp_path)
    name = "resnet-dra-sa"
    run = start_owned(client, api, namespace, name, tmp_path)
    kube.wait_for(lambda: len([p for p in worker_pods(api, namespace, name)
                               if p.status.phase == "Running"]) == 2 or None, 180,
                  "both Workers Running")
    jobs.end_launcher(api, namespace, name, "succeed")
    result, error = run.outcome()
    assert error is None and result.status == "Succeeded", error


def test_a_403_on_the_template_deletes_the_job_and_the_launcher_says_why(plane, api,
                                                                         namespace, tmp_path):
    """``python -m kfp_gpu.mpi.launch.launcher`` as a ServiceAccount whose Role lacks
    ``resourceclaimtemplates`` create: the MPIJob is created, the template's POST gets
    kube-apiserver's 403, the MPIJob is deleted; exit 1, the last stderr line says why."""
    install_rbac(plane, namespace, drop=("resourceclaimtemplates", "create"))
    sa_client(plane, namespace, tmp_path).close()  # writes tmp_path/sa-kubeconfig
    name = "resnet-dra-403"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(
        jobs.component_job(namespace, name, gpu="dra:mig=1g.10gb")))
    proc = subprocess.run(
        [sys.executable, "-m", "kfp_gpu.mpi.launch.launcher", "--job", str(tmp_path / "job.yaml"),
         "--record", str(tmp_path / "record.json"), "--kubeconfig",
         str(tmp_path / "sa-kubeconfig"), "--backoff-initial", "0.2"],
        capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ResourceClaimTemplate {namespace}/{name}-gpu for MPIJob {name} "
                           "could not be made: 403 Forbidden: "), proc.stderr[-3000:]
    assert 'cannot create resource "resourceclaimtemplates"' in line
    assert f"system:serviceaccount:{namespace}:{SA}" in line
    assert line.endswith(f"; MPIJob {namespace}/{name} deleted (propagationPolicy Foreground): "
                         "its pods would wait for GPU claims with no launcher following them")
    assert "Traceback" not in proc.stderr
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 90, "the MPIJob deleted")
    assert template(api, namespace, claims.template_name(name)) is None


def test_another_requests_template_after_the_check_deletes_the_job(plane, api, namespace,
                                                                   tmp_path, monkeypatch):
    """Between the check and the create someone applies a template of another request under
    the job's template name: the create gets kube-apiserver's 409, the launcher finds the
    other spec, deletes its MPIJob and leaves that template alone."""
    name = "resnet-dra-409"
    real = attach.create_or_attach
    theirs: dict = {}

    def create_then_race(*a, **kw):
        out = real(*a, **kw)
        theirs.update(kube.custom(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates",
            claim.template(gpu.parse("dra:gpu=4"), claims.template_name(name), namespace)))
        return out

    monkeypatch.setattr(attach, "create_or_attach", create_then_race)
    run = jobs.Launch(api, jobs.component_job(namespace, name, gpu="dra:mig=1g.10gb"),
                      tmp_path / "record.json")
    run.start()
    _, error = run.outcome()
    assert isinstance(error, launch_claims.ClaimTemplateFailed), error
    msg = str(error)
    assert "could not be made: ClaimTemplateConflict: " in msg and "another GPU request" in msg
    assert f"MPIJob {namespace}/{name} deleted (propagationPolicy Foreground)" in msg
    assert "\n" not in msg
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 90, "the MPIJob deleted")
    kept = template(api, namespace, claims.template_name(name))
    assert kept["metadata"]["uid"] == theirs["metadata"]["uid"]


def test_a_template_create_timeout_deletes_the_job(plane, api, namespace, tmp_path):
    """The template's POSTs get no answer within the client's read timeout (a deliberate
    client timeout: they go to a port that never answers, everything else to
    kube-apiserver): retried as transient, then the MPIJob is deleted."""
    name = "resnet-dra-timeout"
    with template_creates_time_out() as sent:
        run = jobs.Launch(api, jobs.component_job(namespace, name, gpu="dra:mig=1g.10gb"),
                          tmp_path / "record.json")
        run.start()
        _, error = run.outcome()
    assert isinstance(error, launch_claims.ClaimTemplateFailed), error
    assert len(sent) == jobs.FAST.attempts
    msg = str(error)
    assert "could not be made: ReadTimeoutError: " in msg and "Read timed out" in msg, msg
    assert f"MPIJob {namespace}/{name} deleted (propagationPolicy Foreground)" in msg
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 90, "the MPIJob deleted")
    assert template(api, namespace, claims.template_name(name)) is None


def trainjob_pods(api, ns: str, name: str) -> list:
    return kube.pods(api, ns, f"jobset.sigs.k8s.io/jobset-name={name}")


def running_on_mig(api, ns: str, name: str):
    pods = trainjob_pods(api, ns, name)
    return pods if len(pods) == 2 and all(p.status.phase == "Running" for p in pods) else None


def owner_names(api, ns: str) -> list[str]:
    t = template(api, ns, claims.DRA_RUNTIME_TEMPLATE) or {"metadata": {}}
    return [o["name"] for o in t["metadata"].get("ownerReferences") or []]


def test_two_trainjobs_share_the_template_and_the_second_runs_after_the_first_is_gone(
        tier2, api, namespace, dra_cluster, dra_runtime, tmp_path):
    """Tier 2. tj-a runs; tj-b (same request) is created suspended, as Kueue would hold it,
    and becomes the template's second owner; tj-a completes and is deleted: the collector
    drops its reference and keeps the template; tj-b is resumed, its pods claim MIG devices
    from the template and it completes. Before issue 37 the template went with tj-a and
    tj-b's pods had no template to claim from."""
    a = jobs.component_job(namespace, "tj-a", gpu="dra:mig=1g.10gb", workers=2,
                           backend=backends.TRAINJOB)
    run_a = jobs.Launch(api, a, tmp_path / "a.json")
    run_a.start()
    kube.wait_for(lambda: running_on_mig(api, namespace, "tj-a"), 180, "tj-a's pods Running")
    b = jobs.component_job(namespace, "tj-b", gpu="dra:mig=1g.10gb", workers=2,
                           backend=backends.TRAINJOB)
    b["spec"]["suspend"] = True
    run_b = jobs.Launch(api, b, tmp_path / "b.json")
    run_b.start()
    kube.wait_for(lambda: owner_names(api, namespace) == ["tj-a", "tj-b"] or None, 60,
                  "tj-b among the template's owners")
    t = template(api, namespace, claims.DRA_RUNTIME_TEMPLATE)
    assert all(o["blockOwnerDeletion"] is False and o["controller"] is False
               for o in t["metadata"]["ownerReferences"])

    # kube-apiserver honours the resourceVersion precondition of the owner patch: a stale
    # copy gets 409 and changes nothing (the launcher then reads it again)
    stale = copy.deepcopy(t)
    kube.custom(api).patch_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates",
        claims.DRA_RUNTIME_TEMPLATE, {"metadata": {"labels": {"touched": "yes"}}})
    tj = jobs_api.MPIJobClient(api, jobs.FAST, backend=backends.TRAINJOB)
    intruder = {**t["metadata"]["ownerReferences"][0], "name": "tj-z", "uid": "0-0-0"}
    assert launch_claims._add_owner(tj, stale, intruder) is None
    assert owner_names(api, namespace) == ["tj-a", "tj-b"]

    jobs.end_launcher(api, namespace, "tj-a", "succeed", backend=backends.TRAINJOB)
    result, error = run_a.outcome()
    assert error is None and result.status == "Succeeded", error
    kube.custom(api).delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "tj-a",
        body={"propagationPolicy": "Foreground"})
    kube.wait_for(lambda: kube.get_custom(api, "trainer.kubeflow.org", "v1alpha1", namespace,
                                          "trainjobs", "tj-a") is None, 90, "tj-a deleted")
    kube.wait_for(lambda: owner_names(api, namespace) == ["tj-b"] or None, 60,
                  "the collector dropping tj-a's reference")
    kept = template(api, namespace, claims.DRA_RUNTIME_TEMPLATE)
    assert kept["metadata"]["uid"] == t["metadata"]["uid"]
    assert not trainjob_pods(api, namespace, "tj-b")  # still suspended: no pods yet

    kube.custom(api).patch_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "tj-b",
        {"spec": {"suspend": False}})  # what Kueue's admission does
    pods = kube.wait_for(lambda: running_on_mig(api, namespace, "tj-b"), 180,
                         "tj-b's pods Running")
    names = {p.metadata.name for p in pods}
    made = [c for c in claims_of(api, namespace)
            if c["metadata"]["ownerReferences"][0]["name"] in names]
    assert len(made) == 2 and all(
        c["status"]["allocation"]["devices"]["results"][0]["pool"] == "dra-h100-mig-01"
        for c in made)
    jobs.end_launcher(api, namespace, "tj-b", "succeed", backend=backends.TRAINJOB)
    result, error = run_b.outcome(timeout=240)
    assert error is None and result.status == "Succeeded", error
    kube.custom(api).delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", "tj-b",
        body={"propagationPolicy": "Foreground"})
    kube.wait_for(lambda: template(api, namespace, claims.DRA_RUNTIME_TEMPLATE) is None, 90,
                  "the template gone with its last owner")
