"""``kfp-gpu doctor``: what a cluster offers, and whether a pipeline's GPU request can be met.

Split by subject (after KFP's ``diagnose_me``): :mod:`.model` (facts, needs, report),
:mod:`.needs`, :mod:`.nodes`, :mod:`.crds`, :mod:`.rbac`, :mod:`.podsecurity`, and :mod:`.report` (composes
them: :func:`gather` reads, :func:`build_report` judges). The command line is
:mod:`kfp_gpu.cli.doctor`.
"""

from kfp_gpu.cluster.doctor.crds import KAI_QUEUE_CRD, MPI_OPERATOR_RELEASE, MPIJOB_CRD
from kfp_gpu.cluster.doctor.model import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_ACCOUNT,
    Access,
    ClusterFacts,
    Crd,
    Needs,
    Node,
    Report,
)
from kfp_gpu.cluster.doctor.needs import (
    MPIJOB_COMPONENTS,
    needs_from_pipeline,
    needs_from_request,
)
from kfp_gpu.cluster.doctor.nodes import HAMI_NODE_ANNOTATION, hami_devices, hami_gpus
from kfp_gpu.cluster.doctor.rbac import LAUNCHER_PERMISSIONS
from kfp_gpu.cluster.doctor.report import build_report, gather, read_kfp

__all__ = [
    "DEFAULT_NAMESPACE", "DEFAULT_SERVICE_ACCOUNT", "HAMI_NODE_ANNOTATION", "KAI_QUEUE_CRD",
    "LAUNCHER_PERMISSIONS", "MPIJOB_COMPONENTS", "MPIJOB_CRD", "MPI_OPERATOR_RELEASE",
    "Access", "ClusterFacts", "Crd", "Needs", "Node", "Report", "build_report", "gather",
    "hami_devices", "hami_gpus", "needs_from_pipeline", "needs_from_request", "read_kfp",
]
