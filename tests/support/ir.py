"""Strict reading of compiled KFP YAML: both documents parsed into the protobufs.

``PipelineSpec`` (kfp.pipeline_spec) and ``PlatformSpec``, whose Kubernetes executor
configs are parsed again into kfp-kubernetes' ``KubernetesExecutorConfig``; every
parse uses ``ignore_unknown_fields=False`` so a field the protos do not know fails.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from google.protobuf import json_format
from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s_pb2
from kfp.pipeline_spec import pipeline_spec_pb2 as ps


def load(path: str | Path) -> tuple[ps.PipelineSpec, ps.PlatformSpec | None]:
    """Both YAML documents of a compiled pipeline/component, strictly parsed."""
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d is not None]
    if not 1 <= len(docs) <= 2:
        raise AssertionError(f"{path}: expected 1 or 2 YAML documents, got {len(docs)}")
    spec = json_format.ParseDict(docs[0], ps.PipelineSpec(), ignore_unknown_fields=False)
    platform = None
    if len(docs) == 2:
        platform = json_format.ParseDict(docs[1], ps.PlatformSpec(), ignore_unknown_fields=False)
    return spec, platform


def executor_label(spec: ps.PipelineSpec, task: str) -> str:
    """Executor label of root-DAG task ``task`` (e.g. ``train-text-classifier``)."""
    comp = spec.root.dag.tasks[task].component_ref.name
    return spec.components[comp].executor_label


def deployment(spec: ps.PipelineSpec) -> ps.PipelineDeploymentConfig:
    """The deployment spec (a Struct in PipelineSpec), strictly parsed into its proto."""
    return json_format.ParseDict(json_format.MessageToDict(spec.deployment_spec),
                                 ps.PipelineDeploymentConfig(), ignore_unknown_fields=False)


def container(spec: ps.PipelineSpec, task: str):
    """The typed ``PipelineContainerSpec`` of root-DAG task ``task``."""
    return deployment(spec).executors[executor_label(spec, task)].container


def k8s_config(platform: ps.PlatformSpec, executor: str) -> k8s_pb2.KubernetesExecutorConfig:
    """The Kubernetes executor config of ``executor``, strictly parsed."""
    cfg = platform.platforms["kubernetes"].deployment_spec.executors[executor]
    return json_format.ParseDict(json_format.MessageToDict(cfg),
                                 k8s_pb2.KubernetesExecutorConfig(),
                                 ignore_unknown_fields=False)
