"""The TaskConfig the KFP 2.17 driver hands a component with ``task_config_passthroughs``,
built from the project's compiled YAML as kubeflow/pipelines 2.17.0 ``backend/src/v2/driver``
does: ``driver.go`` ``initPodSpecPatch`` (CPU/memory limits and requests from the
``resource*`` fields, the accelerator as a limit, the container env) and ``k8s.go``
``extendPodSpecPatch`` (tolerations, node selector labels; a Secret volume named after the
Secret with ``optional`` written out and a mount without ``readOnly``; each Secret key as
an env var with ``secretKeyRef``), each only for a field the component passes through.
Shared by tests/unit/test_task_config_secrets.py, the component's worker-GPU test
(components/train_resnet_horovod/tests/test_worker_gpu.py) and the real-pod test
(tests/cluster/test_real_pods.py)."""

from __future__ import annotations

import warnings

import yaml
from kfp import dsl

from kfp_gpu.compiler import compile as comp
from kfp_gpu.dsl import task_settings

#: The distributed task of resnet-horovod (its display name in the compiled DAG).
TASK = "train-resnet-horovod"
#: IR container ``resources`` field -> (TaskConfig part, Kubernetes resource name), as
#: driver.go ``initPodSpecPatch`` reads them (``getPodResource``: the string field).
_RESOURCE_FIELDS = {"resourceCpuLimit": ("limits", "cpu"),
                    "resourceCpuRequest": ("requests", "cpu"),
                    "resourceMemoryLimit": ("limits", "memory"),
                    "resourceMemoryRequest": ("requests", "memory")}


def compiled(settings: task_settings.TaskSettings | None = None,
             gpu: str = "gpu:1") -> list[dict]:
    """resnet-horovod's compiled documents (IR, and the Kubernetes platform spec when the
    pipeline has one) for the GPU request ``gpu`` with ``settings`` (``kfp-gpu compile``
    options, :mod:`kfp_gpu.dsl.task_settings`)."""
    (target,) = comp.targets(only="resnet-horovod")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(yaml.safe_load_all(comp.compile_text(target, gpu, settings=settings)))


def training_task(docs: list[dict]) -> tuple[dict, dict, dict]:
    """(IR container, Kubernetes executor config ({} without a platform spec), component)
    of train_resnet_horovod in the compiled ``docs``."""
    ir = docs[0]
    label, executor = next((lbl, e) for lbl, e in ir["deploymentSpec"]["executors"].items()
                           if "train_resnet_horovod" in e["container"].get("args", []))
    platform = (docs[1] if len(docs) > 1 else {}).get("platforms") or {}
    k8s = (((platform.get("kubernetes") or {}).get("deploymentSpec") or {}).get(
        "executors") or {}).get(label, {})
    component = next(c for c in ir["components"].values() if c.get("executorLabel") == label)
    return executor["container"], k8s, component


def compiled_task(settings: task_settings.TaskSettings,
                  gpu: str = "gpu:1") -> tuple[dict, dict, dict]:
    """:func:`training_task` of resnet-horovod compiled for ``gpu`` with ``settings``."""
    return training_task(compiled(settings, gpu))


def task_constants(docs: list[dict], task: str = TASK) -> dict:
    """The constant inputs the root DAG passes to ``task`` (``runtimeValue.constant``), by
    input name; the driver hands them to the component as they are."""
    params = docs[0]["root"]["dag"]["tasks"][task]["inputs"].get("parameters") or {}
    return {name: p["runtimeValue"]["constant"] for name, p in params.items()
            if "constant" in (p.get("runtimeValue") or {})}


def driver_resources(container: dict) -> dict:
    """``TaskConfig.resources`` as driver.go ``initPodSpecPatch`` builds it: CPU/memory
    limits and requests, the accelerator (type and count) as a limit."""
    res = container.get("resources") or {}
    out: dict = {"limits": {}, "requests": {}}
    for field, (part, name) in _RESOURCE_FIELDS.items():
        if res.get(field):
            out[part][name] = str(res[field])
    acc = res.get("accelerator") or {}
    kind = acc.get("resourceType") or acc.get("type")
    count = acc.get("resourceCount") or acc.get("count")
    if kind and count:
        out["limits"][kind] = str(count)
    return out


def driver_task_config(container: dict, k8s: dict, component: dict) -> dsl.TaskConfig:
    """The TaskConfig the 2.17 driver builds for a task whose component passes its env and
    volumes through (checked here), as Kubernetes JSON; resources, tolerations and node
    selector when the component passes them through."""
    passed = {p["field"] for p in component.get("taskConfigPassthroughs") or []}
    assert {"ENV", "KUBERNETES_VOLUMES"} <= passed
    env = [{"name": e["name"], "value": e["value"]} for e in container.get("env") or []]
    for s in k8s.get("secretAsEnv") or []:
        for pair in s["keyToEnv"]:
            ref = {"key": pair["secretKey"], "name": s["secretName"]}
            if "optional" in s:
                ref["optional"] = s["optional"]
            env.append({"name": pair["envVar"], "valueFrom": {"secretKeyRef": ref}})
    vols, mounts = [], []
    for s in k8s.get("secretAsVolume") or []:
        vols.append({"name": s["secretName"], "secret": {
            "secretName": s["secretName"], "optional": bool(s.get("optional"))}})
        mounts.append({"name": s["secretName"], "mountPath": s["mountPath"]})
    return dsl.TaskConfig(
        resources=driver_resources(container) if "RESOURCES" in passed else None,
        tolerations=list(k8s.get("tolerations") or [])
        if "KUBERNETES_TOLERATIONS" in passed else None,
        node_selector=dict((k8s.get("nodeSelector") or {}).get("labels") or {})
        if "KUBERNETES_NODE_SELECTOR" in passed else None,
        env=env, volumes=vols, volume_mounts=mounts)
