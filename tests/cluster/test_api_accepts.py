"""(a) Everything the project builds or ships is accepted by the real API server.

Server-side apply with strict field validation (``kubectl apply --server-side
--validate=strict``: the server answers an unknown or duplicate field with an error instead
of pruning it; k8s.io/apiserver v0.36.3 pkg/endpoints/handlers/fieldmanager, KEP-2885)
against kube-apiserver v1.36.3 with the upstream CRDs the operators we run ship
(mpi-operator v0.8.2 manifests/base/kubeflow.org_mpijobs.yaml; Trainer v2.3.0
manifests/base/crds). ``--dry-run=server`` runs admission and validation without storing.
The JSON-schema tests (tests/unit/test_mpijob.py, tests/harness/test_upstream_crds.py) read the same
CRDs; this asks the code that enforces them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from kfp_gpu.mpi.spec import mpijob, trainjob
from tests.cluster.objects import MANIFESTS, job_options, server_apply
from tests.support.kustomize import OVERLAYS
from tests.support.mpijob_options import REQUESTS


@pytest.mark.parametrize("rdma", [True, False], ids=["rdma", "no-rdma"])
@pytest.mark.parametrize("kind", list(REQUESTS))
def test_every_mpijob_is_accepted(plane, namespace, kind, rdma):
    job = mpijob.build(job_options(namespace, kind, rdma))
    r = server_apply(plane, [job], namespace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [f"mpijob.kubeflow.org/{job['metadata']['name']}"]


@pytest.mark.parametrize("kind", ["gpu", "mig", "fraction", "hami"])
def test_every_trainjob_is_accepted(plane, namespace, trainer_crds, kind):
    job = trainjob.build(job_options(namespace, kind, rdma=True))
    r = server_apply(plane, [job], namespace)
    assert r.returncode == 0, r.stderr


def test_an_unknown_field_is_refused(plane, namespace):
    """The check can fail: a misspelt field is an error under strict validation."""
    job = mpijob.build(job_options(namespace, "gpu", rdma=False))
    job["spec"]["slotPerWorker"] = 8  # slotsPerWorker misspelt
    r = server_apply(plane, [job], namespace)
    assert r.returncode != 0
    # structured-merge-diff's words for SSA of an undeclared field (typed patch)
    assert ".spec.slotPerWorker: field not declared in schema" in r.stderr


def shipped(plane, overlay: str) -> list[dict]:
    r = plane.kubectl("kustomize", str(MANIFESTS / overlay))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


#: Kinds whose CRD no module we build ships (Multus' NetworkAttachmentDefinition): checked
#: against tests/schemas/network-attachment-definition-v1.schema.json by test_manifests.
NO_CRD_HERE = {"NetworkAttachmentDefinition"}


@pytest.fixture(scope="module")
def made_namespaces(plane) -> Iterator[list[str]]:
    """The namespaces the manifests name that this module created: deleted at its end."""
    made: list[str] = []
    yield made
    for ns in made:
        plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.mark.parametrize("overlay", [*OVERLAYS, "trainer"])
def test_every_kustomize_output_is_accepted(plane, trainer_crds, made_namespaces, overlay):
    docs = [d for d in shipped(plane, overlay) if d["kind"] not in NO_CRD_HERE]
    assert docs
    for ns in sorted({d["metadata"].get("namespace") for d in docs} - {None, "kube-system"}):
        if plane.kubectl("create", "namespace", ns, check=False).returncode == 0:
            made_namespaces.append(ns)
    r = server_apply(plane, docs)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == len(docs)
