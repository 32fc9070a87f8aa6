"""``kfp-gpu doctor``: what a cluster offers, and whether a pipeline's GPU request can be met.

Two halves, kept apart:

- :func:`gather` does the I/O (Kubernetes API through the ``kubernetes`` client, the KFP
  API's healthz over HTTP) and returns :class:`~kfp_gpu.cluster.doctor.model.ClusterFacts`,
  plain data;
- :func:`build_report` is pure: facts + what is needed -> a
  :class:`~kfp_gpu.cluster.doctor.model.Report` (rows for the table, problems that make the
  exit status non-zero, warnings).

Each subject has its own module (after KFP's ``diagnose_me``): :mod:`.nodes` (GPU/RDMA
nodes, GFD labels, HAMi, where the request fits), :mod:`.crds` (MPI Operator, KAI),
:mod:`.backends` (MPIJob or TrainJob: Trainer + JobSet CRDs, the kfp-gpu-horovod runtime),
:mod:`.operators` (a live MPI Operator: its leader-election Lease), :mod:`.kai` (the KAI
Scheduler's Deployment and the queue GPU-share pods land in),
:mod:`.rbac` (the launcher's permissions), :mod:`.podsecurity` (the namespace's Pod Security
levels against RDMA's ``IPC_LOCK``), :mod:`.dra` (Dynamic Resource Allocation: the API,
NVIDIA's DeviceClasses and ResourceSlices), :mod:`.kueue` (the LocalQueues a pipeline's
``kueue_queue`` names), and the KFP API here.

What is looked at, with the upstream source of each name:

- Node ``status.allocatable`` extended resources: ``nvidia.com/gpu`` (NVIDIA
  k8s-device-plugin), ``nvidia.com/gpu.shared`` (its time-slicing / MPS replicas with
  ``renameByDefault``), ``nvidia.com/mig-<profile>`` (MIG, ``migStrategy: mixed``),
  ``cnvrg.io/metagpu`` (cnvrg MetaGPU device plugin), ``rdma/<name>``
  (k8s-rdma-shared-dev-plugin); the names a request needs come from
  :meth:`kfp_gpu.gpu.GpuRequest.pod_fragment` (:mod:`.needs`).
- HAMi nodes: the node annotation ``hami.io/node-nvidia-register`` its device plugin writes
  (HAMi's ``nvidia.com/gpumem`` / ``nvidia.com/gpucores`` are not node resources; HAMi's
  scheduler reads them from that annotation).
- GPU Feature Discovery labels: ``nvidia.com/gpu.product``, ``nvidia.com/gpu.memory``
  (MiB), ``nvidia.com/gpu.count``, ``nvidia.com/gpu.replicas``,
  ``nvidia.com/gpu.sharing-strategy``, ``nvidia.com/mig.strategy``.
- CRDs (apiextensions.k8s.io/v1): ``mpijobs.kubeflow.org`` (Kubeflow MPI Operator; the
  suite writes ``kubeflow.org/v2beta1``) and ``queues.scheduling.run.ai`` (KAI Scheduler /
  Run:ai, which serves ``fraction`` / ``gpu-memory`` requests).
- The KFP API: ``GET /apis/v2beta1/healthz``.
- The launcher's ServiceAccount: one ``SelfSubjectAccessReview`` (authorization.k8s.io/v1)
  per verb/resource of manifests/rbac/role.yaml, impersonating
  ``system:serviceaccount:<namespace>:<name>`` (the ``kubectl auth can-i --as`` mechanism;
  needs the ``impersonate`` permission) or as the caller itself.
"""

from __future__ import annotations

from kfp_gpu.cluster import kfp_api
from kfp_gpu.cluster.doctor.backends import backends_section, read_runtimes
from kfp_gpu.cluster.doctor.crds import crds_section, read_crds
from kfp_gpu.cluster.doctor.dra import dra_section, read_dra
from kfp_gpu.cluster.doctor.kai import kai_section, read_kai
from kfp_gpu.cluster.doctor.kueue import kueue_section, read_kueue
from kfp_gpu.cluster.doctor.model import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_ACCOUNT,
    ClusterFacts,
    Needs,
    Report,
)
from kfp_gpu.cluster.doctor.nodes import nodes_section, read_nodes, request_section
from kfp_gpu.cluster.doctor.operators import operators_section, read_operators
from kfp_gpu.cluster.doctor.podsecurity import pod_security_section, read_pod_security
from kfp_gpu.cluster.doctor.rbac import access_section, read_access


def kfp_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The KFP API's healthz row; a problem when it does not answer, or when its backend
    (healthz ``tag_name``) is older than the pipeline needs (``needs.kfp_min``)."""
    if not facts.kfp_host:
        return
    h = facts.kfp or kfp_api.KfpHealth(False, "not checked")
    rep.sections.append(("Kubeflow Pipelines API", ("host", "healthz", "version"),
                         [(facts.kfp_host, ("ok " if h.ok else "FAILED ") + h.detail,
                           h.tag or "-")]))
    if not h.ok:
        rep.problems.append(f"the KFP API at {facts.kfp_host} does not answer: {h.detail}")
        return
    problems, warnings = kfp_api.version_problems(h.tag, needs.kfp_min)
    rep.problems.extend(problems)
    rep.warnings.extend(warnings)


def build_report(facts: ClusterFacts, needs: Needs | None = None) -> Report:
    """Pure: facts + needs -> report (no I/O). Problems are what makes doctor exit 1."""
    needs = needs or Needs()
    rep = Report()
    if facts.connect_error:
        rep.problems.append(f"cannot reach the Kubernetes API: {facts.connect_error}")
    nodes_section(rep, facts, needs)
    crds_section(rep, facts, needs)
    operators_section(rep, facts, needs)
    kai_section(rep, facts, needs)
    backends_section(rep, facts, needs, needs.runtime_image or None)
    kfp_section(rep, facts, needs)
    access_section(rep, facts, needs)
    pod_security_section(rep, facts, needs)
    dra_section(rep, facts, needs)
    kueue_section(rep, facts, needs)
    request_section(rep, facts, needs)
    return rep


def gather(api_client, *, namespace: str = DEFAULT_NAMESPACE,
           service_account: str | None = DEFAULT_SERVICE_ACCOUNT,
           kfp_host: str | None = None, kfp_token: str | None = None,
           kfp_ca_cert: str | None = None, kfp_verify: bool = True,
           needs: Needs | None = None) -> ClusterFacts:
    """Read the cluster: nodes, CRDs, the KAI Scheduler when ``needs`` asks for it, DRA (resource.k8s.io/v1 DeviceClasses and NVIDIA's
    ResourceSlices), access reviews, the namespace's Pod Security labels, KFP healthz.
    Never raises on API errors.

    ``service_account`` ""/None: review the caller's own permissions (run inside the
    launcher pod); else impersonate ``system:serviceaccount:<namespace>:<name>``.
    """
    facts = ClusterFacts(namespace=namespace)
    # KFP first: its row is in the report even when the Kubernetes API does not answer
    read_kfp(facts, kfp_host, kfp_token, kfp_ca_cert, kfp_verify)
    if not read_nodes(api_client, facts):
        return facts
    read_crds(api_client, facts)
    read_operators(api_client, facts)
    read_kai(api_client, facts, needs)
    read_dra(api_client, facts)
    read_runtimes(api_client, facts)
    read_access(api_client, facts, service_account)
    read_pod_security(api_client, facts)
    read_kueue(api_client, facts)
    return facts


def read_kfp(facts: ClusterFacts, kfp_host: str | None = None, kfp_token: str | None = None,
             kfp_ca_cert: str | None = None, kfp_verify: bool = True) -> None:
    """The KFP API's healthz into ``facts`` (nothing without ``kfp_host``; never raises)."""
    if kfp_host:
        facts.kfp_host = kfp_host
        facts.kfp = kfp_api.kfp_health(kfp_host, kfp_token, kfp_ca_cert, kfp_verify)
