"""The pods and MPIJobs a real KFP 2.17.0 backend (driver, launcher; Argo v4.0.5) and
mpi-operator v0.8.2 made from this project's compiled pipelines
(``<data dir>/kfp-2.17.0/pods``) carry exactly the GPU fields the project's compiler writes.

Each recorded object is matched to the pipeline and GPU request it was made from (the file
name), the pipeline is compiled here for that request, and the GPU fields are compared
field by field: the executor container's GPU resources, the pod's tolerations and
nodeSelector, the pod annotations / labels, the ``KFP_GPU_*`` env; for the MPIJob the
Worker template built by ``kfp_gpu.mpi.spec`` from the TaskConfig the 2.17 driver hands the
component (resources, tolerations, node selector, env, PVC volumes).

What the real system adds beyond the compiled spec, and is therefore not compared:
- KFP 2.17 backend/src/v2/compiler/argocompiler/container.go adds to every executor pod a
  RuntimeDefault seccomp profile, ``allowPrivilegeEscalation: false`` and
  ``capabilities.drop: [ALL]``, its own annotations/labels (``pipelines.kubeflow.org/*``,
  ``sidecar.istio.io/inject``, ``pipeline/runid``) and Argo's (``workflows.argoproj.io/*``);
- the API server's DefaultTolerationSeconds admission plugin (kubernetes
  plugin/pkg/admission/defaulttolerationseconds/admission.go) adds the NoExecute
  ``node.kubernetes.io/not-ready`` / ``unreachable`` tolerations (300 s);
- Kubernetes defaulting (kubernetes pkg/apis/core/v1/defaults.go ``SetDefaults_Pod``)
  sets a container's missing requests to its limits, so the driver's accelerator limit
  (backend/src/v2/driver/driver.go ``initPodSpecPatch``: ``res.Limits[type] = count``)
  shows up as a request too;
- mpi-operator v0.8.2 adds ``K_MPI_JOB_ROLE``, the OpenMPI ``OMPI_MCA_*`` env, the
  ``ssh-auth`` / ``mpi-job-config`` volumes (pkg/controller/mpi_job_controller.go).

Without the data folder the cases are skipped; with ``CI=true`` they fail.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml
from kfp import dsl

from kfp_gpu import gpu
from kfp_gpu.compiler import compile as comp
from kfp_gpu.inputs import datadir
from tests.containers.conftest import in_ci
from tests.support import kfp_driver

_root = datadir.resolve()
PODS_DIR = (_root / "kfp-2.17.0" / "pods") if _root is not None else None
FILES = sorted(p.name for p in PODS_DIR.glob("*.yaml")) if PODS_DIR and PODS_DIR.is_dir() \
    else []
#: Recorded file -> (pipeline, GPU request it was compiled with, shared PVC mounted).
MADE_FROM = {
    "fractional-eval-fraction-0.25-evaluate-shard.yaml": ("fractional-eval", "fraction:0.25"),
    "imdb-lstm-gpu1-train-text-classifier.yaml": ("imdb-lstm", "gpu:1"),
    "imdb-lstm-mig-1g.10gb-task-a.yaml": ("imdb-lstm", "mig:1g.10gb"),
    "imdb-lstm-mig-1g.10gb-task-b.yaml": ("imdb-lstm", "mig:1g.10gb"),
    "resnet-horovod-gpu8-launcher.yaml": ("resnet-horovod", "gpu:8"),
    "resnet-horovod-gpu8-mpijob.yaml": ("resnet-horovod", "gpu:8"),
    "resnet-horovod-gpu8-worker-0.yaml": ("resnet-horovod", "gpu:8"),
    "resnet-horovod-mig-mpijob.yaml": ("resnet-horovod", "mig:1g.10gb"),
    "resnet-horovod-pvc-mpijob.yaml": ("resnet-horovod", "gpu:1"),
    "resnet-horovod-task-pod.yaml": ("resnet-horovod", "gpu:8"),
}
#: The PVC of the recorded PVC run: kfp.kubernetes.mount_pvc(task, pvc_name=..., mount_path=...)
#: (read from the recorded MPIJob's Worker volumes and the trainer's --output-dir).
PVC = {"claim": "resnet-shared", "mount_path": "/mnt/shared"}
GPU_TOLERATION = {"key": gpu.GPU_TOLERATION_KEY, "operator": "Exists", "effect": "NoSchedule"}
#: Tolerations the API server adds (DefaultTolerationSeconds), not the compiler.
ADMISSION_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
#: Annotation / label prefixes KFP's Argo compiler, Argo and kubectl add.
SYSTEM_PREFIXES = ("pipelines.kubeflow.org/", "workflows.argoproj.io/", "sidecar.istio.io/",
                   "kubectl.kubernetes.io/", "pipeline/runid")


def _data() -> Path:
    reason = f"no recorded KFP 2.17.0 pods in {PODS_DIR} (set ${datadir.ENV})"
    if not FILES:
        if in_ci():
            pytest.fail(f"{reason} (CI=true: the data must be there)", pytrace=False)
        pytest.skip(reason)
    return PODS_DIR


_compiled: dict[tuple[str, str], list[dict]] = {}


def compiled(name: str, request: str) -> list[dict]:
    """The project's compiled documents (IR, platform spec) for ``request``."""
    if (name, request) not in _compiled:
        (target,) = comp.targets(only=name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = comp.compile_text(target, request)
        _compiled[name, request] = list(yaml.safe_load_all(text))
    return _compiled[name, request]


def executor_for(docs: list[dict], function: str) -> tuple[dict, dict]:
    """(IR container, platform-spec executor config) of the executor running ``function``."""
    for label, e in docs[0]["deploymentSpec"]["executors"].items():
        args = (e.get("container") or {}).get("args") or []
        if function in args and args[args.index(function) - 1] == "--function_to_execute":
            k8s = ((docs[1] if len(docs) > 1 else {}).get("platforms") or {}).get(
                "kubernetes", {})
            return e["container"], (k8s.get("deploymentSpec", {}).get("executors") or {}).get(
                label, {})
    raise AssertionError(f"no executor runs {function!r}")


def component_of(docs: list[dict], function: str) -> dict:
    label = next(lbl for lbl, e in docs[0]["deploymentSpec"]["executors"].items()
                 if function in ((e.get("container") or {}).get("args") or []))
    return next(c for c in docs[0]["components"].values() if c.get("executorLabel") == label)


def gpu_resources(resources: dict | None) -> dict:
    """``{"limits": {...}, "requests": {...}}`` restricted to non-cpu/memory resources."""
    return {k: {n: str(q) for n, q in ((resources or {}).get(k) or {}).items()
                if n not in ("cpu", "memory", "ephemeral-storage")}
            for k in ("limits", "requests")}


def kfp_gpu_env(env: list[dict] | None) -> dict:
    return {e["name"]: e["value"] for e in env or [] if e["name"].startswith("KFP_GPU_")}


def user_metadata(meta: dict, key: str) -> dict:
    return {k: v for k, v in (meta.get(key) or {}).items()
            if not any(k.startswith(p) for p in SYSTEM_PREFIXES)}


def main_container(pod: dict) -> dict:
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] not in ("wait",)]
    return c


def test_every_recorded_object_is_checked():
    _data()
    assert sorted(MADE_FROM) == FILES


# ------------------------------------------------------------------ KFP executor pods

#: (recorded file, passthrough field) the project changed on purpose after the recording
#: (main 756cb42), with the commit and why; the test checks the change is the one named.
CHANGED_SINCE_RECORDING = {
    ("resnet-horovod-task-pod.yaml", "ENV"):
        "1eef75c: ENV passes through with apply_to_task=True, so the Secret env of "
        "`kfp-gpu compile --secret-env` reaches the launcher task pod (it stages the data in "
        "an s3:// work_dir and fetches the model); the recorded pod got env passed through "
        "to the Workers only",
}

EXECUTOR_PODS = [f for f in MADE_FROM if f.startswith(("imdb-lstm", "fractional-eval"))
                 or f == "resnet-horovod-task-pod.yaml"]


@pytest.mark.parametrize("name", EXECUTOR_PODS)
def test_executor_pod_carries_the_compiled_gpu_fields(name):
    pod = yaml.safe_load((_data() / name).read_text())
    pipeline, request = MADE_FROM[name]
    docs = compiled(pipeline, request)
    main = main_container(pod)
    args = main.get("args") or []
    function = args[args.index("--function_to_execute") + 1]
    container, k8s = executor_for(docs, function)
    passthrough = {p["field"]: p.get("applyToTask", False) for p in
                   component_of(docs, function).get("taskConfigPassthroughs") or []}

    acc = (container.get("resources") or {}).get("accelerator") or {}
    limits = {acc["resourceType"]: str(acc["resourceCount"])} if acc else {}
    if passthrough.get("RESOURCES") is False:  # handed to the component, not the pod
        limits = {}
    # driver.go initPodSpecPatch: the accelerator as a limit; defaulting copies it to requests
    assert gpu_resources(main.get("resources")) == {"limits": limits, "requests": limits}

    tolerations = [t for t in pod["spec"].get("tolerations") or []
                   if t["key"] not in ADMISSION_TOLERATIONS]
    want_tol = [] if passthrough.get("KUBERNETES_TOLERATIONS") is False \
        else list(k8s.get("tolerations") or [])
    assert tolerations == want_tol
    want_ns = {} if passthrough.get("KUBERNETES_NODE_SELECTOR") is False \
        else dict((k8s.get("nodeSelector") or {}).get("labels") or {})
    assert dict(pod["spec"].get("nodeSelector") or {}) == want_ns
    meta = k8s.get("podMetadata") or {}
    assert user_metadata(pod["metadata"], "annotations") == dict(meta.get("annotations") or {})
    assert user_metadata(pod["metadata"], "labels") == dict(meta.get("labels") or {})
    want_env = {e["name"]: e["value"] for e in container.get("env") or []}
    if (name, "ENV") in CHANGED_SINCE_RECORDING:
        # The recording predates the change: the compile now applies env to the task pod
        # too, and the recorded pod (env passed through only) has none of it.
        assert passthrough.get("ENV") is True
        assert kfp_gpu_env(main.get("env")) == {}
        return
    if passthrough.get("ENV") is False:
        want_env = {}
    assert kfp_gpu_env(main.get("env")) == kfp_gpu_env([{"name": k, "value": v}
                                                        for k, v in want_env.items()])


def test_the_fraction_pod_asks_kai_and_no_device_plugin():
    """fraction:0.25 is a pod annotation only (KAI): no accelerator resource at all."""
    pod = yaml.safe_load((_data() / "fractional-eval-fraction-0.25-evaluate-shard.yaml")
                         .read_text())
    r = gpu.parse("fraction:0.25")
    assert pod["metadata"]["annotations"][gpu.FRACTION_ANNOTATION] == "0.25"
    assert gpu_resources(main_container(pod)["resources"]) == {"limits": {}, "requests": {}}
    assert kfp_gpu_env(main_container(pod)["env"]) == dict(r.env())


# ------------------------------------------------------------------ MPIJob Workers


def task_config(docs: list[dict], pvc: bool) -> dsl.TaskConfig:
    """The TaskConfig the KFP 2.17 driver hands train_resnet_horovod
    (backend/src/v2/driver/driver.go ``initPodSpecPatch``: resources,
    :func:`tests.support.kfp_driver.driver_resources`; the container env; driver/k8s.go:
    tolerations, node selector, the PVC volume named after its claim)."""
    container, k8s = executor_for(docs, "train_resnet_horovod")
    vols, mounts = [], []
    if pvc:
        vols = [{"name": PVC["claim"], "persistentVolumeClaim": {"claimName": PVC["claim"]}}]
        mounts = [{"name": PVC["claim"], "mountPath": PVC["mount_path"]}]
    return dsl.TaskConfig(
        resources=kfp_driver.driver_resources(container),
        tolerations=list(k8s.get("tolerations") or []),
        node_selector=dict((k8s.get("nodeSelector") or {}).get("labels") or {}),
        env=[{"name": e["name"], "value": e["value"]} for e in container.get("env") or []],
        volumes=vols, volume_mounts=mounts)


def built_mpijob(recorded: dict, request: str, pvc: bool) -> dict:
    """The MPIJob kfp_gpu.mpi.spec builds from the compiled task's TaskConfig, its
    ``worker_gpu`` constant (the Workers' request, as text) and the recorded job's own
    parameters (name, workers, the trainer's args)."""
    from kfp_gpu.components.train_resnet_horovod import run_training as rt
    from kfp_gpu.mpi.spec import mpijob

    spec = recorded["spec"]["mpiReplicaSpecs"]
    launcher = spec["Launcher"]["template"]["spec"]["containers"][0]
    cmd = launcher["command"]
    args = cmd[cmd.index("train-resnet") + 1:]
    docs = compiled("resnet-horovod", request)
    settings = rt.worker_settings(task_config(docs, pvc),
                                  kfp_driver.task_constants(docs)["worker_gpu"])
    opts = rt.job_options(
        name=recorded["metadata"]["name"], namespace=recorded["metadata"]["namespace"],
        image=launcher["image"], args=args, workers=spec["Worker"]["replicas"],
        settings=settings, rdma=False, rdma_resource="rdma/rdma_shared_device_a",
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="", run_id=recorded["metadata"]["annotations"]["kfp-gpu/pipeline-run-id"],
        task_name=recorded["metadata"]["annotations"]["kfp-gpu/task-name"])
    return mpijob.build(opts)


MPIJOBS = [f for f in MADE_FROM if f.endswith("-mpijob.yaml")]


@pytest.mark.parametrize("name", MPIJOBS)
def test_mpijob_workers_carry_the_compiled_gpu_fields(name):
    recorded = yaml.safe_load((_data() / name).read_text())
    _, request = MADE_FROM[name]
    built = built_mpijob(recorded, request, pvc="-pvc-" in name)
    assert built["spec"]["slotsPerWorker"] == recorded["spec"]["slotsPerWorker"]
    rec_w = recorded["spec"]["mpiReplicaSpecs"]["Worker"]
    new_w = built["spec"]["mpiReplicaSpecs"]["Worker"]
    assert new_w["replicas"] == rec_w["replicas"]
    rec_pod, new_pod = rec_w["template"]["spec"], new_w["template"]["spec"]
    (rec_c,), (new_c,) = rec_pod["containers"], new_pod["containers"]
    assert gpu_resources(new_c.get("resources")) == gpu_resources(rec_c.get("resources"))
    assert new_c.get("resources") == rec_c.get("resources")  # cpu/memory too (none here)
    assert new_pod.get("tolerations") == rec_pod.get("tolerations")
    assert new_pod.get("nodeSelector") == rec_pod.get("nodeSelector")
    assert kfp_gpu_env(new_c.get("env")) == kfp_gpu_env(rec_c.get("env"))
    assert new_c.get("env") == rec_c.get("env")
    assert new_pod.get("volumes") == rec_pod.get("volumes")
    assert new_c.get("volumeMounts") == rec_c.get("volumeMounts")
    assert new_pod.get("securityContext") == rec_pod.get("securityContext")
    r = gpu.parse(request)
    assert kfp_gpu_env(rec_c["env"]) == dict(r.env())
    assert gpu_resources(rec_c["resources"])["limits"] == {r.resource_name:
                                                          str(r.resource_count)}


def test_the_worker_and_launcher_pods_keep_the_template_gpu_fields():
    """mpi-operator copies the Worker template into the pod; it adds only its own env,
    volumes and the admission tolerations."""
    d = _data()
    job = yaml.safe_load((d / "resnet-horovod-gpu8-mpijob.yaml").read_text())
    for role, pod_file in (("Worker", "resnet-horovod-gpu8-worker-0.yaml"),
                           ("Launcher", "resnet-horovod-gpu8-launcher.yaml")):
        pod = yaml.safe_load((d / pod_file).read_text())
        tpl = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        (tc,), (pc,) = tpl["containers"], pod["spec"]["containers"]
        assert pc["resources"] == tc["resources"]
        assert kfp_gpu_env(pc["env"]) == kfp_gpu_env(tc["env"])
        assert [t for t in pod["spec"].get("tolerations") or []
                if t["key"] not in ADMISSION_TOLERATIONS] == (tpl.get("tolerations") or [])
        assert pod["spec"].get("nodeSelector") == tpl.get("nodeSelector")
    assert GPU_TOLERATION in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"][
        "tolerations"]
