"""Doctor, subject nodes: GPU/RDMA extended resources, GPU Feature Discovery labels, HAMi's
node registration, and whether one pod of the request fits on each node.

Names: ``nvidia.com/gpu`` (NVIDIA k8s-device-plugin), ``nvidia.com/gpu.shared`` (its
time-slicing / MPS replicas with ``renameByDefault``), ``nvidia.com/mig-<profile>`` (MIG,
``migStrategy: mixed``), ``cnvrg.io/metagpu`` (cnvrg MetaGPU), ``rdma/<name>``
(k8s-rdma-shared-dev-plugin); GFD labels ``nvidia.com/gpu.*`` (NVIDIA
gpu-feature-discovery); ``hami.io/node-nvidia-register`` (Project-HAMi device plugin).
"""

from __future__ import annotations

import json
import re

from kfp_gpu import gpu
from kfp_gpu.cluster.doctor import dra
from kfp_gpu.cluster.doctor.model import (
    UNAUTHORIZED,
    ClusterFacts,
    Needs,
    Node,
    Report,
    api_error,
    fmt,
)
from kfp_gpu.gpu.names import DRA_DRIVER

HAMI_NODE_ANNOTATION = "hami.io/node-nvidia-register"
GFD_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.count",
              "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy",
              "nvidia.com/mig.strategy")
_REPORTED = re.compile(r"^(nvidia\.com/(gpu|gpu\.shared|mig-.+)|cnvrg\.io/metagpu|rdma/.+)$")


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


def _resources_fit(node: Node, needs: Needs) -> str:
    for name, qty in needs.resources.items():
        have = node.allocatable.get(name, 0.0)
        if have < qty:
            return f"{name}: {fmt(have)} allocatable < {qty}"
        physical = hami_gpus(node) if name == gpu.GPU_RESOURCE else 0
        if physical and qty > physical:
            return (f"{name}: HAMi vGPUs on {physical} physical GPUs < {qty} (one pod's "
                    "vGPUs must be on distinct GPUs)")
    return ""


def _request_fits(node: Node, req) -> str:
    if req.kind == "hami":
        devices = hami_devices(node)
        if not devices:
            return f"no HAMi device registration ({HAMI_NODE_ANNOTATION})"
        big = [d for d in devices if d["memory_mib"] >= req.memory_mib]
        if len(big) < req.count:
            return f"HAMi: {len(big)} GPUs with >= {req.memory_mib} MiB, {req.count} needed"
    if req.kind == "dra":
        found = dra.matching_devices(node, req)
        if found < req.count:
            return (f"DRA: {found} device(s) of {DRA_DRIVER} match "
                    f"'{req.to_text()}', {req.count} needed")
    if req.kind in ("fraction", "gpu-memory"):
        if node.allocatable.get(gpu.GPU_RESOURCE, 0.0) < 1:
            return f"no {gpu.GPU_RESOURCE}"
        if req.kind == "gpu-memory":
            mem = node.labels.get("nvidia.com/gpu.memory", "")
            if mem.isdigit() and int(mem) < req.memory_mib:
                return f"GPU memory {mem} MiB < {req.memory_mib} MiB"
    return ""


def fits(node: Node, needs: Needs) -> str:
    """'' when ``node`` can run one pod of ``needs``, else why not."""
    if node.unschedulable:
        return "cordoned"
    for k, v in needs.node_selector.items():
        if node.labels.get(k) != v:
            return f"label {k}={node.labels.get(k, '<unset>')} (needs {v})"
    why = _resources_fit(node, needs)
    if not why and needs.request is not None:
        why = _request_fits(node, needs.request)
    return why


def nodes_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The GPU/RDMA node table; a problem when nodes cannot be listed for a request."""
    node_rows = []
    for n in sorted(facts.nodes, key=lambda n: n.name):
        res = ", ".join(f"{k}={fmt(v)}" for k, v in sorted(n.allocatable.items())
                        if _REPORTED.match(k) and v > 0)
        if HAMI_NODE_ANNOTATION in n.annotations:
            res = ", ".join(x for x in (res, "HAMi-registered") if x)
        res = ", ".join(x for x in (res, dra.summary(n)) if x)
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
    elif not facts.connect_error and not node_rows:  # (DRA devices make a row too)
        rep.warnings.append("no node advertises a GPU, MIG, shared-GPU, MetaGPU or RDMA "
                            "resource (is the NVIDIA device plugin running?)")


def request_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """Per node: does one pod of the request fit? A problem when no node fits."""
    if not needs.resources and needs.request is None:
        return
    dra_claim = needs.request is not None and needs.request.kind == "dra"
    want = ", ".join(f"{k}: {v}" for k, v in needs.resources.items()) or (
        f"a claim '{needs.request.to_text()}'" if dra_claim else "no limit")
    if needs.node_selector:
        want += "; nodeSelector " + ", ".join(f"{k}={v}" for k, v in
                                              needs.node_selector.items())
    rows = []
    for n in sorted(facts.nodes, key=lambda n: n.name):
        why = fits(n, needs)
        rows.append((n.name, "fits" if not why else why))
        if not why:
            rep.satisfied_by.append(n.name)
    title = f"Request ({needs.source}): {want}" if needs.source else f"Request: {want}"
    rep.sections.append((title, ("node", "one pod fits?"), rows))
    if not facts.nodes_error and not facts.connect_error and not rep.satisfied_by:
        reasons = sorted({r[1] for r in rows}) or ["the cluster has no nodes"]
        rep.problems.append(f"no node can run a pod with {want}: " + "; ".join(reasons))


def read_nodes(api_client, facts: ClusterFacts) -> bool:
    """List the nodes into ``facts``; False when the API cannot be reached at all."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        resp = client.CoreV1Api(api_client).list_node(_preload_content=False,
                                                      _request_timeout=30)
        facts.nodes = [Node.from_api(o) for o in json.loads(resp.data).get("items", [])]
    except ApiException as e:
        facts.nodes_error = api_error(e)
        if e.status == 401:
            facts.connect_error = f"{UNAUTHORIZED}: check the kubeconfig credentials"
    except (urllib3.exceptions.HTTPError, OSError) as e:
        facts.connect_error = f"{type(e).__name__}: {e}"
        return False
    return True
