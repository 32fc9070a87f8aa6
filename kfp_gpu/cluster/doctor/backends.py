"""Doctor, subject "training backends": which of the two job kinds the
distributed component can launch here -- the MPI Operator's MPIJob or a Kubeflow Trainer v2
TrainJob on the ``kfp-gpu-horovod`` ClusterTrainingRuntime -- and what is missing for the
one a run will use (``--backend``).

Pure report functions over plain facts, plus :func:`gather_runtimes` (one LIST). Names:

- CRDs ``trainjobs.trainer.kubeflow.org`` and ``clustertrainingruntimes.trainer.kubeflow.org``
  (kubeflow/trainer v2.3.0 ``manifests/base/crds``; the suite writes ``v1alpha1``) and
  ``jobsets.jobset.x-k8s.io`` (JobSet, which Trainer runs every TrainJob on; Trainer v2.3.0's
  ``manifests/third-party/jobset`` installs JobSet v0.12.0).
- ClusterTrainingRuntime ``kfp-gpu-horovod`` (manifests/trainer): present, with an
  ``mlPolicy.mpi`` policy, and its node image (the TrainJob sets the launcher's image only;
  the node pods run the runtime's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kfp_gpu.cluster.doctor.model import (
    ClusterFacts,
    Needs,
    Report,
    Runtime,
    RuntimeFacts,
    api_error,
)
from kfp_gpu.mpi.spec import claims, crd, trainjob

TRAINER_RELEASE = "v2.3.0"
JOBSET_RELEASE = "v0.12.0"
TRAINJOB_CRD = f"{trainjob.PLURAL}.{trainjob.GROUP}"
RUNTIME_CRD = f"{trainjob.RUNTIME_PLURAL}.{trainjob.GROUP}"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
#: CRDs this subject reads (besides the MPIJob CRD doctor always reads).
CRDS = (TRAINJOB_CRD, RUNTIME_CRD, JOBSET_CRD)
BACKENDS = ("mpijob", "trainjob")
#: The launcher's RBAC resource per backend (manifests/rbac/role.yaml).
BACKEND_RESOURCES = {"mpijob": (crd.GROUP, crd.PLURAL),
                     "trainjob": (trainjob.GROUP, trainjob.PLURAL)}


def read_runtimes(api_client, facts: ClusterFacts) -> None:
    """LIST ``clustertrainingruntimes`` into ``facts.runtimes`` when their CRD is there
    (cluster-scoped; needs ``list`` on them). Never raises on API errors."""
    c = facts.crds.get(RUNTIME_CRD)
    if c is not None and c.present:
        facts.runtimes = _list_runtimes(api_client)


def _list_runtimes(api_client) -> RuntimeFacts:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    facts = RuntimeFacts()
    try:
        resp = client.CustomObjectsApi(api_client).list_cluster_custom_object(
            trainjob.GROUP, trainjob.VERSION, trainjob.RUNTIME_PLURAL, _preload_content=False,
            _request_timeout=30)
        facts.runtimes = [Runtime.from_api(o) for o in json.loads(resp.data).get("items", [])]
        facts.listed = True
    except ApiException as e:
        facts.error = api_error(e)
    return facts


def _served(c, version: str) -> str:
    """'ok' / why not, for a CRD lookup (doctor.Crd or None)."""
    if c is None:
        return "not checked"
    if c.error:
        return c.error
    if not c.present:
        return "not installed"
    return "ok" if version in c.served else f"does not serve {version}"


def rows(crds: Mapping, runtimes: RuntimeFacts, expected_image: str,
         runtime: str = trainjob.DEFAULT_RUNTIME) -> list[tuple[str, ...]]:
    """Rows ``(backend, needs, status)`` of the "Training backends" table (``runtime``:
    the ClusterTrainingRuntime the TrainJob names; ``dra`` requests: the DRA one)."""
    out = [("mpijob", f"CRD {crd.CRD_NAME} {crd.VERSION}",
            _served(crds.get(crd.CRD_NAME), crd.VERSION)),
           ("trainjob", f"CRD {TRAINJOB_CRD} {trainjob.VERSION}",
            _served(crds.get(TRAINJOB_CRD), trainjob.VERSION)),
           ("trainjob", f"CRD {JOBSET_CRD}", _served(crds.get(JOBSET_CRD), "v1alpha2"))]
    out.append(("trainjob", f"ClusterTrainingRuntime {runtime}",
                runtime_status(runtimes, expected_image, runtime)))
    return out


def runtime_status(runtimes: RuntimeFacts, expected_image: str,
                   runtime: str = trainjob.DEFAULT_RUNTIME) -> str:
    """'ok (image X)' or what is wrong with the kfp-gpu-horovod runtime (or ``runtime``:
    kfp-gpu-horovod-dra of manifests/trainer-dra for ``dra`` requests)."""
    if runtimes.error:
        return f"cannot list: {runtimes.error}"
    found = [r for r in runtimes.runtimes if r.name == runtime]
    if not found:
        others = ", ".join(r.name for r in runtimes.runtimes if r.mpi) or "none"
        where = "manifests/trainer-dra" if runtime == claims.DRA_RUNTIME else "manifests/trainer"
        return f"not installed (MPI runtimes here: {others}); apply {where}"
    rt = found[0]
    if not rt.mpi or not rt.launcher_as_node:
        return "has no mlPolicy.mpi with runLauncherAsNode; re-apply manifests/trainer"
    if expected_image and expected_image not in rt.images:
        return (f"runs {', '.join(rt.images)}, not {expected_image}: the node pods would run "
                "another build than the launcher")
    return f"ok ({', '.join(rt.images)})"


def problems(backend: str, crds: Mapping, runtimes: RuntimeFacts,
             expected_image: str, runtime: str = trainjob.DEFAULT_RUNTIME) -> list[str]:
    """What stops ``backend`` from running a job here (empty = ready)."""
    out = []
    if backend == "mpijob":
        status = _served(crds.get(crd.CRD_NAME), crd.VERSION)
        if status != "ok":
            out.append(f"backend mpijob: CRD {crd.CRD_NAME} {status}; install the MPI "
                       "Operator (manifests/mpi-operator) or use --backend trainjob")
        return out
    needed = ((TRAINJOB_CRD, trainjob.VERSION, f"Kubeflow Trainer {TRAINER_RELEASE}"),
              (JOBSET_CRD, "v1alpha2", f"JobSet {JOBSET_RELEASE}"))
    for name, version, what in needed:
        status = _served(crds.get(name), version)
        if status != "ok":
            out.append(f"backend trainjob: CRD {name} {status}; install {what} "
                       "(docs/distributed.md)")
    status = runtime_status(runtimes, expected_image, runtime)
    if not status.startswith("ok"):
        out.append(f"backend trainjob: ClusterTrainingRuntime {runtime} {status}")
    return out


def backends_section(rep: Report, facts: ClusterFacts, needs: Needs,
                     expected_image: str | None = None) -> None:
    """The "Training backends" table; problems for the backend a distributed run uses
    when that is ``trainjob`` (the MPIJob CRD's own problems come from :mod:`.crds`).

    ``expected_image``: the node image the runtime must run -- the compiled
    ``runtime_image`` of the pipeline a run will use; default the Horovod image of the
    default :class:`kfp_gpu.release.images.ImageSet` (a value, never the environment)."""
    if facts.connect_error:
        return
    from kfp_gpu.release import images

    image = expected_image or images.ImageSet().image(images.HOROVOD)
    dra = needs.request is not None and needs.request.kind == "dra"
    runtime = claims.DRA_RUNTIME if dra else trainjob.DEFAULT_RUNTIME
    rep.sections.append(("Training backends", ("backend", "needs", "status"),
                         rows(facts.crds, facts.runtimes, image, runtime)))
    if needs.mpi and needs.backend == "trainjob":
        rep.problems.extend(problems("trainjob", facts.crds, facts.runtimes, image, runtime))
