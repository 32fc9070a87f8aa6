"""Objects the cluster tests put on a plane, shared by their fixtures
(tests/cluster/conftest.py) and tests: the project's manifests as ``kubectl kustomize``
renders them, the project's ClusterTrainingRuntime, the jobs of every option
(:func:`job_options`), and the strict server-side apply that asks the API server whether
it accepts them (:func:`server_apply`)."""

from __future__ import annotations

import yaml

from tests.support.kustomize import MANIFESTS
from tests.support.mpijob_options import every_option


def kustomized(plane, overlay: str) -> list[dict]:
    """The documents of ``manifests/<overlay>`` as the plane's kubectl renders them."""
    out = plane.kubectl("kustomize", str(MANIFESTS / overlay)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def install_trainer_runtime(plane, overlay: str = "trainer") -> str:
    """Apply the project's ClusterTrainingRuntime (``manifests/<overlay>``) and return its
    name. Trainer v2.3.0's validating webhook refuses a TrainJob whose ``runtimeRef`` names
    no existing runtime (``pkg/webhooks/trainjob_webhook.go`` ValidateCreate ->
    ``pkg/runtime/core/clustertrainingruntime.go`` ValidateObjects: "specified
    clusterTrainingRuntime must be created before the TrainJob is created"), so any test
    that creates a TrainJob needs it on a plane whose Trainer runs."""
    docs = kustomized(plane, overlay)
    plane.apply(docs)
    return next(d["metadata"]["name"] for d in docs if d["kind"] == "ClusterTrainingRuntime")


def server_apply(plane, docs: list[dict], ns: str | None = None, dry_run: bool = True):
    """``kubectl apply --server-side --validate=strict`` of ``docs`` (a dry run unless
    ``dry_run`` is false); returns the CompletedProcess, not checked."""
    args = ["apply", "--server-side", "--validate=strict", "--field-manager=kfp-gpu",
            "-f", "-", "-o", "name"]
    if dry_run:
        args.append("--dry-run=server")
    if ns:
        args += ["-n", ns]
    return plane.kubectl(*args, input=yaml.safe_dump_all(docs), check=False)


def job_options(ns: str, kind: str, rdma: bool):
    """:func:`tests.support.mpijob_options.every_option` in namespace ``ns``."""
    return every_option(kind, rdma, namespace=ns)
