"""Doctor, subject CRDs (apiextensions.k8s.io/v1): the MPI Operator's
``mpijobs.kubeflow.org`` (the suite writes ``kubeflow.org/v2beta1``, :mod:`kfp_gpu.mpi.spec.crd`)
and the KAI Scheduler / Run:ai ``queues.scheduling.run.ai`` (serves ``fraction`` /
``gpu-memory`` requests); and those of the TrainJob backend
(:data:`kfp_gpu.cluster.doctor.backends.CRDS`: Trainer's TrainJob / ClusterTrainingRuntime,
JobSet), judged in :mod:`.backends`."""

from __future__ import annotations

import json

from kfp_gpu.cluster.doctor.backends import CRDS as BACKEND_CRDS
from kfp_gpu.cluster.doctor.model import ClusterFacts, Crd, Needs, Report, api_error
from kfp_gpu.mpi.spec import crd

MPI_OPERATOR_RELEASE = "v0.8.2"
MPIJOB_CRD = crd.CRD_NAME
KAI_QUEUE_CRD = "queues.scheduling.run.ai"


def crds_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The CRD table; problems when an MPIJob or a KAI request lacks its CRD."""
    rows = []
    for name in (MPIJOB_CRD, KAI_QUEUE_CRD, *BACKEND_CRDS):
        c = facts.crds.get(name)
        if c is None:
            continue
        status = ("served: " + ", ".join(c.served)) if c.present else (c.error or "not installed")
        rows.append((name, status))
    rep.sections.append(("Custom resources", ("CRD", "status"), rows))
    mpi_crd = facts.crds.get(MPIJOB_CRD)
    if needs.mpi and needs.backend == "mpijob" and mpi_crd is not None:
        if mpi_crd.error:
            rep.problems.append(f"cannot read CRD {MPIJOB_CRD}: {mpi_crd.error}")
        elif not mpi_crd.present:
            rep.problems.append(f"the MPI Operator is not installed (CRD {MPIJOB_CRD} not "
                                f"found); apply manifests/mpi-operator (release "
                                f"{MPI_OPERATOR_RELEASE})")
        elif crd.VERSION not in mpi_crd.served:
            rep.problems.append(f"CRD {MPIJOB_CRD} does not serve {crd.VERSION} (served: "
                                f"{', '.join(mpi_crd.served) or 'none'}); upgrade the MPI "
                                f"Operator to {MPI_OPERATOR_RELEASE}")
    req = needs.request
    kai = facts.crds.get(KAI_QUEUE_CRD)
    if needs.kai and kai is not None and not kai.present:
        what = f"'{req.to_text()}'" if req is not None else "the pipeline's pod annotations " \
            + ", ".join(f"{k}={v}" for k, v in sorted(needs.annotations.items()))
        rep.problems.append(f"{what} needs the KAI Scheduler / Run:ai (CRD "
                            f"{KAI_QUEUE_CRD} {kai.error or 'not found'}); without it the "
                            "pod gets no GPU at all")


def read_crds(api_client, facts: ClusterFacts) -> None:
    """Look the CRDs up into ``facts.crds`` (404 = not present; other errors recorded)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    for name in (MPIJOB_CRD, KAI_QUEUE_CRD, *BACKEND_CRDS):
        c = Crd(name=name)
        try:
            resp = ext.read_custom_resource_definition(name, _preload_content=False,
                                                       _request_timeout=30)
            obj = json.loads(resp.data)
            c.present = True
            c.served = tuple(v["name"] for v in obj.get("spec", {}).get("versions", [])
                             if v.get("served"))
        except ApiException as e:
            if e.status != 404:
                c.error = api_error(e)
        facts.crds[name] = c
