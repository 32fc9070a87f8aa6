"""``kfp-gpu doctor``: what a cluster offers, and whether a pipeline's GPU request can be met.

Two halves, kept apart:

- :func:`gather` does the I/O (Kubernetes API through the ``kubernetes`` client, the KFP
  API's healthz over HTTP) and returns :class:`ClusterFacts`, plain data;
- :func:`build_report` is pure: facts + what is needed -> :class:`Report` (rows for the
  table, problems that make the exit status non-zero, warnings).

What is looked at, with the upstream source of each name:

- Node ``status.allocatable`` extended resources: ``nvidia.com/gpu`` (NVIDIA
  k8s-device-plugin), ``nvidia.com/gpu.shared`` (its time-slicing / MPS replicas with
  ``renameByDefault``), ``nvidia.com/mig-<profile>`` (MIG, ``migStrategy: mixed``),
  ``cnvrg.io/metagpu`` (cnvrg MetaGPU device plugin), ``rdma/<name>``
  (k8s-rdma-shared-dev-plugin); the names a request needs come from
  :meth:`kfp_gpu.gpu.GpuRequest.pod_fragment`.
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

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import typer

from kfp_gpu import gpu as gpu_model

MPI_OPERATOR_RELEASE = "v0.8.2"
MPIJOB_CRD = "mpijobs.kubeflow.org"
MPIJOB_GROUP = "kubeflow.org"
MPIJOB_VERSION = "v2beta1"
KAI_QUEUE_CRD = "queues.scheduling.run.ai"
DEFAULT_NAMESPACE = "kubeflow"
#: KFP's runner account (standalone; multi-user: default-editor), bound by manifests/rbac.
DEFAULT_SERVICE_ACCOUNT = "pipeline-runner"
HAMI_NODE_ANNOTATION = "hami.io/node-nvidia-register"
GFD_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.count",
              "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy",
              "nvidia.com/mig.strategy")
#: (apiGroup, resource[/subresource], verb) the launcher needs: manifests/rbac/role.yaml.
LAUNCHER_PERMISSIONS: tuple[tuple[str, str, str], ...] = (
    ("kubeflow.org", "mpijobs", "create"), ("kubeflow.org", "mpijobs", "delete"),
    ("kubeflow.org", "mpijobs", "get"), ("kubeflow.org", "mpijobs", "list"),
    ("kubeflow.org", "mpijobs", "watch"),
    ("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
    ("", "pods/log", "get"),
    ("", "events", "list"),
)
_REPORTED = re.compile(r"^(nvidia\.com/(gpu|gpu\.shared|mig-.+)|cnvrg\.io/metagpu|rdma/.+)$")


# ----------------------------------------------------------------------------- data


@dataclass
class Node:
    """One Node as doctor needs it. ``allocatable``: resource -> quantity (float)."""

    name: str
    allocatable: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False

    @classmethod
    def from_api(cls, obj: dict) -> Node:
        """From a Node object (JSON dict as the API returns it)."""
        from kubernetes.utils import parse_quantity

        meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
        alloc = {}
        for k, v in (status.get("allocatable") or {}).items():
            try:
                alloc[k] = float(parse_quantity(v))
            except ValueError:
                continue
        return cls(name=meta.get("name", "?"), allocatable=alloc,
                   labels=dict(meta.get("labels") or {}),
                   annotations=dict(meta.get("annotations") or {}),
                   unschedulable=bool(spec.get("unschedulable")))


@dataclass
class Crd:
    """A CRD lookup: ``present`` False when the API said 404; ``error`` for anything else."""

    name: str
    present: bool = False
    served: tuple[str, ...] = ()
    error: str = ""


@dataclass
class Access:
    """One SelfSubjectAccessReview answer (``allowed`` None when the review itself failed)."""

    group: str
    resource: str
    verb: str
    allowed: bool | None
    reason: str = ""


@dataclass
class ClusterFacts:
    """Everything :func:`gather` saw. ``*_error``: why that part could not be read."""

    nodes: list[Node] = field(default_factory=list)
    nodes_error: str = ""
    crds: dict[str, Crd] = field(default_factory=dict)
    kfp_host: str = ""
    kfp_ok: bool | None = None
    kfp_detail: str = ""
    namespace: str = DEFAULT_NAMESPACE
    subject: str = ""
    access: list[Access] = field(default_factory=list)
    access_error: str = ""
    connect_error: str = ""


@dataclass
class Needs:
    """What the pipeline / request needs from the cluster.

    Attributes:
        request: the GPU request (None = only report what is there).
        resources: extended resource -> count per pod (from ``pod_fragment`` or the compiled
            pipeline's accelerator settings).
        node_selector: labels a node must carry.
        mpi: the pipeline launches an MPIJob (MPI Operator CRD + launcher RBAC needed).
        source: where the needs came from, for the report.
    """

    request: gpu_model.GpuRequest | None = None
    resources: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    mpi: bool = False
    source: str = ""


@dataclass
class Report:
    """Sections of rows (tuples of str) for the table, and the verdict."""

    sections: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = field(
        default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    satisfied_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self) -> str:
        """The readable table (plain text, fixed-width columns)."""
        out: list[str] = []
        for title, header, rows in self.sections:
            out.append(f"== {title}")
            table = [header, *rows] if rows else [header, ("(none)",)]
            widths = [max(len(r[i]) if i < len(r) else 0 for r in table)
                      for i in range(len(header))]
            for r in table:
                out.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
            out.append("")
        for w in self.warnings:
            out.append(f"warning: {w}")
        for p in self.problems:
            out.append(f"PROBLEM: {p}")
        if self.satisfied_by:
            out.append(f"request fits on: {', '.join(self.satisfied_by)}")
        out.append("verdict: OK" if self.ok else "verdict: NOT READY")
        return "\n".join(out)


# ----------------------------------------------------------------------------- needs


def needs_from_request(request: gpu_model.GpuRequest, *, mpi: bool = False,
                       source: str = "") -> Needs:
    """Needs of one GPU request (resource names and selector from ``pod_fragment``)."""
    frag = request.pod_fragment()
    # HAMi's gpumem / gpucores are not node resources (its scheduler reads the node
    # registration annotation): they are checked in _fits, not against allocatable.
    res = {k: int(float(v)) for k, v in frag["resources"]["limits"].items()
           if k not in (gpu_model.HAMI_MEM_RESOURCE, gpu_model.HAMI_CORES_RESOURCE)}
    return Needs(request=request, resources=res, node_selector=dict(frag["nodeSelector"]),
                 mpi=mpi, source=source or f"--gpu {request.to_text()}")


#: Components that create an MPIJob (their ``--function_to_execute``).
MPIJOB_COMPONENTS = ("train_resnet_mpijob",)


def _creates_mpijob(container: dict) -> bool:
    """True for an executor that creates an MPIJob: a known MPIJob component (it runs on
    the trainer image) or anything on the kfp-gpu launcher image."""
    args = [str(a) for a in container.get("args") or []]
    fn = args[args.index("--function_to_execute") + 1] \
        if "--function_to_execute" in args[:-1] else ""
    return fn in MPIJOB_COMPONENTS or "kfp-gpu-launcher" in container.get("image", "")


def needs_from_pipeline(spec: dict, request: gpu_model.GpuRequest | None = None,
                        source: str = "") -> Needs:
    """Needs of a compiled KFP pipeline (IR YAML loaded as dict).

    The accelerator (``resources.accelerator.resourceType`` / ``resourceCount``) of each
    executor and the node selectors of the Kubernetes platform spec give the needs; an
    executor of an MPIJob component (``MPIJOB_COMPONENTS``) or on the kfp-gpu launcher
    image means an MPIJob. ``request`` (``--gpu``)
    replaces the pipeline's own GPU settings, as ``kfp-gpu compile --gpu`` would.
    """
    docs = spec if isinstance(spec, list) else [spec]
    pipeline = docs[0]
    executors = pipeline.get("deploymentSpec", {}).get("executors", {})
    mpi = any(_creates_mpijob(e.get("container", {})) for e in executors.values())
    if request is not None:
        return needs_from_request(request, mpi=mpi, source=source)
    resources: dict[str, int] = {}
    for e in executors.values():
        acc = e.get("container", {}).get("resources", {}).get("accelerator", {})
        rtype = acc.get("resourceType") or acc.get("type")
        count = int(acc.get("resourceCount") or acc.get("count") or 0)
        if rtype and count:
            resources[rtype] = max(resources.get(rtype, 0), count)
    selector: dict[str, str] = {}
    for d in docs[1:]:
        k8s = (d.get("platforms") or {}).get("kubernetes", {})
        for e in (k8s.get("deploymentSpec", {}).get("executors") or {}).values():
            ns = e.get("nodeSelector") or {}
            selector.update(ns.get("labels") or {})
    return Needs(resources=resources, node_selector=selector, mpi=mpi, source=source)


# ----------------------------------------------------------------------------- report


def _fmt(q: float) -> str:
    return str(int(q)) if float(q).is_integer() else f"{q:g}"


def hami_devices(node: Node) -> list[dict]:
    """HAMi's registered devices on ``node``: ``[{"id", "memory_mib"}]`` ([] if none)."""
    raw = node.annotations.get(HAMI_NODE_ANNOTATION, "").strip()
    if not raw:
        return []
    try:
        devices = json.loads(raw)
        return [{"id": d.get("id", ""), "memory_mib": int(d.get("devmem", 0))}
                for d in devices if isinstance(d, dict)]
    except ValueError:
        out = []
        for entry in raw.split(":"):
            fields = entry.split(",")
            if len(fields) >= 3 and fields[0].startswith("GPU-") and fields[2].isdigit():
                out.append({"id": fields[0], "memory_mib": int(fields[2])})
        return out


def hami_gpus(node: Node) -> int:
    """Physical GPUs in HAMi's node registration annotation (0 when not HAMi-registered).

    HAMi's device plugin advertises ``nvidia.com/gpu`` as physical GPUs x deviceSplitCount
    (vGPUs), while one pod's vGPUs must sit on distinct physical GPUs; the annotation lists
    the physical ones: ``id,count,memMiB,cores,type,numa,healthy`` entries separated by
    ``:`` (older HAMi) or a JSON list (newer).
    """
    return len(hami_devices(node))


def _fits(node: Node, needs: Needs) -> str:
    """'' when ``node`` can run one pod of ``needs``, else why not."""
    if node.unschedulable:
        return "cordoned"
    for k, v in needs.node_selector.items():
        if node.labels.get(k) != v:
            return f"label {k}={node.labels.get(k, '<unset>')} (needs {v})"
    for name, qty in needs.resources.items():
        have = node.allocatable.get(name, 0.0)
        if have < qty:
            return f"{name}: {_fmt(have)} allocatable < {qty}"
        physical = hami_gpus(node) if name == gpu_model.GPU_RESOURCE else 0
        if physical and qty > physical:
            return (f"{name}: HAMi vGPUs on {physical} physical GPUs < {qty} (one pod's "
                    "vGPUs must be on distinct GPUs)")
    req = needs.request
    if req is not None and req.kind == "hami":
        devices = hami_devices(node)
        if not devices:
            return f"no HAMi device registration ({HAMI_NODE_ANNOTATION})"
        big = [d for d in devices if d["memory_mib"] >= req.memory_mib]
        if len(big) < req.count:
            return (f"HAMi: {len(big)} GPUs with >= {req.memory_mib} MiB, "
                    f"{req.count} needed")
    if req is not None and req.kind in ("fraction", "gpu-memory"):
        if node.allocatable.get(gpu_model.GPU_RESOURCE, 0.0) < 1:
            return f"no {gpu_model.GPU_RESOURCE}"
        if req.kind == "gpu-memory":
            mem = node.labels.get("nvidia.com/gpu.memory", "")
            if mem.isdigit() and int(mem) < req.memory_mib:
                return f"GPU memory {mem} MiB < {req.memory_mib} MiB"
    return ""


def build_report(facts: ClusterFacts, needs: Needs | None = None) -> Report:
    """Pure: facts + needs -> report (no I/O). Problems are what makes doctor exit 1."""
    needs = needs or Needs()
    rep = Report()
    if facts.connect_error:
        rep.problems.append(f"cannot reach the Kubernetes API: {facts.connect_error}")

    # Nodes: GPU-ish allocatable and GFD labels.
    node_rows = []
    for n in sorted(facts.nodes, key=lambda n: n.name):
        res = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(n.allocatable.items())
                        if _REPORTED.match(k) and v > 0)
        if HAMI_NODE_ANNOTATION in n.annotations:
            res = ", ".join(x for x in (res, "HAMi-registered") if x)
        labels = " ".join(f"{k.split('/', 1)[1]}={n.labels[k]}" for k in GFD_LABELS
                          if k in n.labels)
        if res or labels:
            node_rows.append((n.name + (" (cordoned)" if n.unschedulable else ""),
                              res or "-", labels or "-"))
    rep.sections.append(("GPU / RDMA nodes", ("node", "allocatable", "GPU Feature Discovery"),
                         node_rows))
    if facts.nodes_error:
        (rep.problems if needs.resources or needs.request else rep.warnings).append(
            f"cannot list nodes: {facts.nodes_error}")
    elif not facts.connect_error and not node_rows:
        rep.warnings.append("no node advertises a GPU, MIG, shared-GPU, MetaGPU or RDMA "
                            "resource (is the NVIDIA device plugin running?)")

    # CRDs.
    crd_rows = []
    for name in (MPIJOB_CRD, KAI_QUEUE_CRD):
        c = facts.crds.get(name)
        if c is None:
            continue
        status = ("served: " + ", ".join(c.served)) if c.present else (c.error or "not installed")
        crd_rows.append((name, status))
    rep.sections.append(("Custom resources", ("CRD", "status"), crd_rows))
    mpi_crd = facts.crds.get(MPIJOB_CRD)
    if needs.mpi and mpi_crd is not None:
        if mpi_crd.error:
            rep.problems.append(f"cannot read CRD {MPIJOB_CRD}: {mpi_crd.error}")
        elif not mpi_crd.present:
            rep.problems.append(f"the MPI Operator is not installed (CRD {MPIJOB_CRD} not "
                                f"found); apply manifests/mpi-operator (release "
                                f"{MPI_OPERATOR_RELEASE})")
        elif MPIJOB_VERSION not in mpi_crd.served:
            rep.problems.append(f"CRD {MPIJOB_CRD} does not serve {MPIJOB_VERSION} (served: "
                                f"{', '.join(mpi_crd.served) or 'none'}); upgrade the MPI "
                                f"Operator to {MPI_OPERATOR_RELEASE}")
    req = needs.request
    kai = facts.crds.get(KAI_QUEUE_CRD)
    if req is not None and req.kind in ("fraction", "gpu-memory") and kai is not None \
            and not kai.present:
        rep.problems.append(f"'{req.to_text()}' needs the KAI Scheduler / Run:ai (CRD "
                            f"{KAI_QUEUE_CRD} {kai.error or 'not found'}); without it the "
                            "pod gets no GPU at all")

    # KFP API.
    if facts.kfp_host:
        rep.sections.append(("Kubeflow Pipelines API", ("host", "healthz"),
                             [(facts.kfp_host, ("ok " if facts.kfp_ok else "FAILED ")
                               + facts.kfp_detail)]))
        if not facts.kfp_ok:
            rep.problems.append(f"the KFP API at {facts.kfp_host} does not answer: "
                                f"{facts.kfp_detail}")

    # Launcher permissions.
    if facts.access or facts.access_error:
        rows = [(f"{a.verb} {a.resource}" + (f" ({a.group})" if a.group else ""),
                 {True: "yes", False: "NO", None: "?"}[a.allowed] + (
                     f"  {a.reason}" if a.reason and a.allowed is not True else ""))
                for a in facts.access]
        rep.sections.append((f"Launcher permissions: {facts.subject} in {facts.namespace}",
                             ("action", "allowed"), rows))
        missing = [f"{a.verb} {a.resource}" for a in facts.access if a.allowed is False]
        unknown = [f"{a.verb} {a.resource}" for a in facts.access if a.allowed is None]
        target = rep.problems if needs.mpi else rep.warnings
        if facts.access_error:
            target.append(f"cannot check {facts.subject}'s permissions: {facts.access_error}")
        if missing:
            target.append(f"{facts.subject} may not {', '.join(missing)} in namespace "
                          f"{facts.namespace}; apply manifests/rbac")
        if unknown and not facts.access_error:
            target.append(f"access review failed for {', '.join(unknown)}")

    # The request.
    if needs.resources or req is not None:
        want = ", ".join(f"{k}: {v}" for k, v in needs.resources.items()) or "no limit"
        if needs.node_selector:
            want += "; nodeSelector " + ", ".join(f"{k}={v}" for k, v in
                                                  needs.node_selector.items())
        rows = []
        for n in sorted(facts.nodes, key=lambda n: n.name):
            why = _fits(n, needs)
            rows.append((n.name, "fits" if not why else why))
            if not why:
                rep.satisfied_by.append(n.name)
        title = f"Request ({needs.source}): {want}" if needs.source else f"Request: {want}"
        rep.sections.append((title, ("node", "one pod fits?"), rows))
        if not facts.nodes_error and not facts.connect_error and not rep.satisfied_by:
            reasons = sorted({r[1] for r in rows}) or ["the cluster has no nodes"]
            rep.problems.append(f"no node can run a pod with {want}: " + "; ".join(reasons))
    return rep


# ----------------------------------------------------------------------------- I/O


def _api_error(e: Exception) -> str:
    status = getattr(e, "status", None)
    body = getattr(e, "body", None) or ""
    msg = ""
    try:
        msg = json.loads(body).get("message", "")
    except (ValueError, TypeError, AttributeError):
        msg = str(body)[:200]
    if status:
        return f"HTTP {status} {getattr(e, 'reason', '')}".rstrip() + (f": {msg}" if msg else "")
    return f"{type(e).__name__}: {e}"


def kube_client(kubeconfig: str | None = None, context: str | None = None):
    """A ``kubernetes.client.ApiClient`` from a kubeconfig, else in-cluster config.

    Raises:
        RuntimeError: no usable configuration (message says what was tried).
    """
    import os

    from kubernetes import client, config

    if kubeconfig and os.pathsep in kubeconfig:
        kubeconfig = None  # a $KUBECONFIG list: the client merges it itself
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            return config.new_client_from_config(config_file=kubeconfig, context=context)
        except (config.ConfigException, OSError, ValueError, TypeError) as e:
            raise RuntimeError(f"cannot load kubeconfig {kubeconfig or '~/.kube/config'}: {e}")
    config.load_incluster_config()
    return client.ApiClient()


def kfp_healthz(host: str, token: str | None = None, ca_cert: str | None = None,
                verify: bool = True, timeout: float = 10.0) -> tuple[bool, str]:
    """GET ``<host>/apis/v2beta1/healthz``: (ok, detail)."""
    import requests

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = requests.get(host.rstrip("/") + "/apis/v2beta1/healthz", headers=headers,
                         timeout=timeout, verify=(ca_cert or True) if verify else False)
    except requests.RequestException as e:
        return False, f"{type(e).__name__}: {e}"
    if r.status_code != 200:
        return False, f"HTTP {r.status_code}: {r.text[:200].strip()}"
    try:
        body = r.json()
    except ValueError:
        return False, "healthz answered, but not with JSON"
    mode = "multi-user" if body.get("multi_user") else "single-user"
    return True, f"({mode})"


def gather(api_client, *, namespace: str = DEFAULT_NAMESPACE,
           service_account: str | None = DEFAULT_SERVICE_ACCOUNT,
           kfp_host: str | None = None, kfp_token: str | None = None,
           kfp_ca_cert: str | None = None, kfp_verify: bool = True) -> ClusterFacts:
    """Read the cluster: nodes, CRDs, access reviews, KFP healthz. Never raises on API errors.

    ``service_account`` ""/None: review the caller's own permissions (run inside the
    launcher pod); else impersonate ``system:serviceaccount:<namespace>:<name>``.
    """
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    facts = ClusterFacts(namespace=namespace)
    core = client.CoreV1Api(api_client)
    try:
        resp = core.list_node(_preload_content=False, _request_timeout=30)
        facts.nodes = [Node.from_api(o) for o in json.loads(resp.data).get("items", [])]
    except ApiException as e:
        facts.nodes_error = _api_error(e)
        if e.status == 401:
            facts.connect_error = "unauthorized (HTTP 401): check the kubeconfig credentials"
    except (urllib3.exceptions.HTTPError, OSError) as e:
        facts.connect_error = f"{type(e).__name__}: {e}"
        return facts

    ext = client.ApiextensionsV1Api(api_client)
    for name in (MPIJOB_CRD, KAI_QUEUE_CRD):
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
                c.error = _api_error(e)
        facts.crds[name] = c

    if service_account:
        subject = f"system:serviceaccount:{namespace}:{service_account}"
        reviewer = client.ApiClient(api_client.configuration)
        reviewer.set_default_header("Impersonate-User", subject)
    else:
        subject, reviewer = "the current user", api_client
    facts.subject = subject
    authz = client.AuthorizationV1Api(reviewer)
    for group, resource, verb in LAUNCHER_PERMISSIONS:
        res, _, sub = resource.partition("/")
        attrs = {"namespace": namespace, "verb": verb, "group": group, "resource": res}
        if sub:
            attrs["subresource"] = sub
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs}}
        try:
            resp = authz.create_self_subject_access_review(body, _preload_content=False,
                                                           _request_timeout=30)
            st = json.loads(resp.data).get("status", {})
            facts.access.append(Access(group, resource, verb, bool(st.get("allowed")),
                                       st.get("reason", "") or st.get("evaluationError", "")))
        except ApiException as e:
            facts.access_error = _api_error(e)
            facts.access = []
            break

    if kfp_host:
        facts.kfp_host = kfp_host
        facts.kfp_ok, facts.kfp_detail = kfp_healthz(kfp_host, kfp_token, kfp_ca_cert,
                                                     kfp_verify)
    return facts


# ----------------------------------------------------------------------------- CLI


def doctor_command(
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", envvar="KUBECONFIG",
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
    pipeline: str | None = typer.Option(
        None, "--pipeline", help="Catalog pipeline name or compiled pipeline YAML whose "
        "needs to check (GPU request, MPI Operator, launcher RBAC)."),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU request to check, e.g. 'gpu:2', 'mig:1g.10gb', "
        "'shared:1,renamed=true', 'metagpu:50' (replaces the pipeline's own)."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n",
                                  help="Namespace the pipeline runs in."),
    service_account: str = typer.Option(
        DEFAULT_SERVICE_ACCOUNT, "--service-account",
        help="ServiceAccount the run's pods use, whose launcher permissions to review "
        "(impersonated; multi-user Kubeflow: default-editor); '' = "
        "review the caller's own."),
    kfp_host: str | None = typer.Option(
        None, "--kfp-host", envvar="KFP_HOST", help="KFP API URL to check (healthz)."),
    ssl_ca_cert: str | None = typer.Option(None, "--ssl-ca-cert",
                                              help="CA bundle for the KFP API."),
    insecure_skip_tls_verify: bool = typer.Option(False, "--insecure-skip-tls-verify"),
) -> None:
    """Report what the cluster offers and whether a pipeline's GPU request can be met.

    Exit status 0 when everything needed is there, 1 with the reasons otherwise, 2 for bad
    input.
    """
    needs = None
    try:
        request = gpu_model.parse(gpu) if gpu else None
        if pipeline:
            import yaml

            from kfp_gpu.submit import resolve_pipeline

            path, _ = resolve_pipeline(pipeline)
            spec = list(yaml.safe_load_all(Path(path).read_text()))
            needs = needs_from_pipeline(spec, request,
                                        source=f"pipeline {pipeline}"
                                        + (f", --gpu {request.to_text()}" if request else ""))
        elif request is not None:
            needs = needs_from_request(request)
    except (ValueError, FileNotFoundError) as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)

    from kfp_gpu.submit import kfp_token

    try:
        api = kube_client(kubeconfig, context)
    except RuntimeError as e:
        facts = ClusterFacts(namespace=namespace, connect_error=str(e))
    else:
        facts = gather(api, namespace=namespace, service_account=service_account or None,
                       kfp_host=kfp_host, kfp_token=kfp_token() if kfp_host else None,
                       kfp_ca_cert=ssl_ca_cert, kfp_verify=not insecure_skip_tls_verify)
    report = build_report(facts, needs)
    typer.echo(report.render())
    if not report.ok:
        raise typer.Exit(1)
