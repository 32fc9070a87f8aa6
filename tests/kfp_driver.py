"""The TaskConfig the KFP 2.17 driver hands a component with ``task_config_passthroughs``,
built from the project's compiled YAML as kubeflow/pipelines 2.17.0 ``backend/src/v2/driver``
does: ``driver.go`` ``initPodSpecPatch`` (the accelerator as a limit, the container env)
and ``k8s.go`` ``extendPodSpecPatch`` (a Secret volume named after the Secret with
``optional`` written out and a mount without ``readOnly``; each Secret key as an env var
with ``secretKeyRef``). Shared by tests/test_task_config_secrets.py and the real-pod test
(tests/cluster/test_real_pods.py)."""

from __future__ import annotations

import warnings

import yaml
from kfp import dsl

from kfp_gpu.compiler import compile as comp
from kfp_gpu.compiler import task_settings


def compiled_task(settings: task_settings.TaskSettings) -> tuple[dict, dict, dict]:
    """(IR container, Kubernetes executor config, component) of train_resnet_horovod in
    resnet-horovod compiled for ``gpu:1`` with ``settings`` (``kfp-gpu compile`` options,
    :mod:`kfp_gpu.compiler.task_settings`)."""
    (target,) = comp.targets(only="resnet-horovod")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ir, platform = yaml.safe_load_all(comp.compile_text(target, "gpu:1",
                                                            settings=settings))
    label, executor = next((lbl, e) for lbl, e in ir["deploymentSpec"]["executors"].items()
                           if "train_resnet_horovod" in e["container"].get("args", []))
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][label]
    component = next(c for c in ir["components"].values() if c.get("executorLabel") == label)
    return executor["container"], k8s, component


def driver_task_config(container: dict, k8s: dict, component: dict) -> dsl.TaskConfig:
    """The TaskConfig the 2.17 driver builds for a task whose component passes its env and
    volumes through (checked here), as Kubernetes JSON."""
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
    acc = container["resources"]["accelerator"]
    return dsl.TaskConfig(resources={"limits": {acc["resourceType"]: str(acc["resourceCount"])}},
                          env=env, volumes=vols, volume_mounts=mounts)
