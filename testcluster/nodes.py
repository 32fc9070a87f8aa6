"""Fake GPU nodes for the real control plane: the same seven nodes the API double serves
(testcluster/data/k8s_cluster_nodes.json: GPU Feature Discovery labels, the NVIDIA device
plugin's whole/MIG-mixed/time-sliced resources, rdma/*, MetaGPU, HAMi), made into kwok
nodes. Pure builders: no I/O but reading that JSON file.

kwok manages a node that carries the annotation ``kwok.x-k8s.io/node: fake``
(:mod:`testcluster.controlplane` gives kwok-controller
``--manage-nodes-with-annotation-selector``: kwokctl's binary runtime would manage all
nodes, sigs.k8s.io/kwok@v0.8.0 pkg/kwokctl/components/kwok_controller.go, the real node's
too); its node-initialize
stage keeps the ``status.capacity/allocatable`` a node was created with
(kustomize/stage/node/fast/node-initialize.yaml), and the heartbeat stage keeps it Ready.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

#: The node list both the fake nodes here and the Kubernetes API double of the unit tests
#: serve (tests/doubles/k8s_cluster.py reads this file).
DOUBLE_NODES = Path(__file__).resolve().parent / "data" / "k8s_cluster_nodes.json"

#: kwok's node-selection annotation (sigs.k8s.io/kwok@v0.8.0 pkg/kwokctl: the
#: kwok-controller's ``--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake``).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Label every fake node carries, so tests can select them (and nothing else).
FAKE_NODE_LABEL = "kfp-gpu.test/fake-node"


def double_nodes() -> list[dict]:
    """The API double's Node objects (GET /api/v1/nodes shape) as a list of dicts."""
    return json.loads(DOUBLE_NODES.read_text(encoding="utf-8"))["items"]


def kwok_node(node: dict) -> dict:
    """``node`` as an object to create on the real API server and hand to kwok.

    Server-owned fields (uid, resourceVersion, creationTimestamp) are dropped, the kwok
    annotation and :data:`FAKE_NODE_LABEL` added; spec and status (labels, taints,
    capacity, allocatable, nodeInfo) are kept as the double serves them. The ``Ready``
    condition is left to kwok's node-initialize stage.
    """
    n = copy.deepcopy(node)
    meta = n["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp"):
        meta.pop(k, None)
    meta.setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
    meta.setdefault("labels", {})[FAKE_NODE_LABEL] = "true"
    meta["labels"]["type"] = "kwok"
    status = n.setdefault("status", {})
    status.pop("conditions", None)
    # timeAdded is set by the node lifecycle controller; a client may not send it.
    spec = n.setdefault("spec", {})
    for t in spec.get("taints") or []:
        t.pop("timeAdded", None)
        # A cordoned node: the node lifecycle controller keeps this taint in step with
        # spec.unschedulable (kubernetes pkg/controller/nodelifecycle), so say it there.
        if t["key"] == "node.kubernetes.io/unschedulable":
            spec["unschedulable"] = True
    return n


def nodes_table(nodes: list[dict] | None = None) -> str:
    """The fake nodes as a Markdown table (node, GPU product label, extended resources of
    its capacity, taints, cordoned): tests/cluster/README.md shows it and
    tests/docs/test_docs_restated.py compares the two, so what a test writer reads about the
    nodes (which carry the ``nvidia.com/gpu`` taint) is the data. ``nodes``: Node dicts
    (default :func:`fake_nodes`)."""
    lines = ["| node | `nvidia.com/gpu.product` | extended resources | taints | cordoned |",
             "|---|---|---|---|---|"]
    for n in fake_nodes() if nodes is None else nodes:
        labels, spec = n["metadata"].get("labels", {}), n.get("spec", {})
        extended = [f"`{k}: {v}`" for k, v in n.get("status", {}).get("capacity", {}).items()
                    if "/" in k and v != "0"]
        taints = [f"`{t['key']}` {t['effect']}" for t in spec.get("taints") or []
                  if t["key"] != "node.kubernetes.io/unschedulable"]
        lines.append(f"| {n['metadata']['name']} | {labels.get('nvidia.com/gpu.product', '-')} "
                     f"| {', '.join(extended) or '-'} | {', '.join(taints) or '-'} "
                     f"| {'yes' if spec.get('unschedulable') else '-'} |")
    return "\n".join(lines)


def fake_nodes() -> list[dict]:
    """All seven fake GPU nodes, ready to create (:func:`kwok_node` of each double node)."""
    return [kwok_node(n) for n in double_nodes()]
