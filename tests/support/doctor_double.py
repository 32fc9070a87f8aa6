"""What the ``kfp-gpu doctor`` tests give doctor to judge, shared by tests/unit/test_doctor*.py
and tests/unit/test_gpu_dra_class.py: the command run against the Kubernetes API double
(:func:`run`, tests/doubles/k8s_cluster.py), the recorded nodes (:func:`nodes`,
:func:`dra_nodes`) and ready-made facts (:func:`facts`, :func:`crds`). The rendered
manifests/rbac is the ``rbac_objects`` fixture (tests/conftest.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import typer
from typer.testing import CliRunner

from kfp_gpu.cli import doctor as doctor_cli
from kfp_gpu.cluster import doctor
from kfp_gpu.cluster.doctor import backends as db
from tests.doubles.k8s_cluster import FakeCluster, recorded_nodes

#: The runtime image the shipped manifests/trainer names.
IMAGE = "ghcr.io/kfp-gpu/kfp-gpu-horovod:0.1.0"


def run(cluster: FakeCluster, tmp_path: Path, *args: str, token: str = "admin-token"):
    """``kfp-gpu doctor --kubeconfig <a kubeconfig for cluster as token> *args`` in
    process; returns typer's Result."""
    app = typer.Typer()
    app.command()(doctor_cli.doctor_command)
    kc = cluster.kubeconfig(tmp_path / f"kubeconfig-{token}", token=token)
    return CliRunner().invoke(app, ["--kubeconfig", str(kc), *args])


def nodes() -> list[doctor.Node]:
    """The recorded Node objects (testcluster/data/k8s_cluster_nodes.json) as doctor reads
    them."""
    return [doctor.Node.from_api(o) for o in recorded_nodes()]


def facts(**kw) -> doctor.ClusterFacts:
    """ClusterFacts of the recorded nodes with the MPIJob CRD served and no KAI queue CRD,
    ``kw`` set over them."""
    kw.setdefault("nodes", nodes())
    kw.setdefault("crds", {doctor.MPIJOB_CRD: doctor.Crd(doctor.MPIJOB_CRD, True, ("v2beta1",)),
                           doctor.KAI_QUEUE_CRD: doctor.Crd(doctor.KAI_QUEUE_CRD, False)})
    return doctor.ClusterFacts(**kw)


def crds(*, mpi: bool = True, trainer: bool = True) -> dict:
    """The CRD facts with the MPIJob CRD and/or Trainer's (TrainJob, runtime, JobSet)
    served."""
    out = {doctor.MPIJOB_CRD: doctor.Crd(doctor.MPIJOB_CRD, mpi, ("v2beta1",) if mpi else ())}
    for name, version in ((db.TRAINJOB_CRD, "v1alpha1"), (db.RUNTIME_CRD, "v1alpha1"),
                          (db.JOBSET_CRD, "v1alpha2")):
        out[name] = doctor.Crd(name, trainer, (version,) if trainer else ())
    return out


def dra_nodes() -> list[dict]:
    """The recorded nodes plus two DRA-only GPU nodes (no device plugin: no nvidia.com/*
    allocatable), as a cluster that runs NVIDIA's DRA driver there would show them."""
    cpu = next(n for n in recorded_nodes() if n["metadata"]["name"] == "cpu-01")
    out = recorded_nodes()
    for name in ("dra-h100-01", "dra-h100-mig-01"):
        n = copy.deepcopy(cpu)
        n["metadata"]["name"] = name
        n["metadata"]["labels"]["kubernetes.io/hostname"] = name
        out.append(n)
    return out
