"""The two distributed-training backends the launcher can follow: the MPI Operator's
``MPIJob`` and Kubeflow Trainer v2's ``TrainJob``, as small data (no I/O).

A :class:`Backend` is what the launcher needs to know about a job kind: where it lives in
the API (group/version/plural), which condition types end it, how its conditions map to a
phase, and how to find the pod whose log is the run's log. Upstream sources:

- MPIJob (kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1/types.go``, ``constants.go``):
  JobCondition types Created, Running, Restarting, Suspended, Succeeded, Failed; the
  Launcher pod is labelled ``training.kubeflow.org/job-name=<job>`` and
  ``training.kubeflow.org/job-role=launcher``, container ``launcher``
  (:func:`kfp_gpu.mpi.spec.mpijob.launcher_template`).
- TrainJob (kubeflow/trainer v2.3.0 ``pkg/apis/trainer/v1alpha1/trainjob_types.go``):
  condition types Suspended, Complete, Failed (``metav1.Condition``; no Created or Running
  condition -- the JobSet plugin copies JobSet's Completed/Failed, ``plugins/jobset``
  ``Status()``, and ``status.jobsStatus`` per replicated job, whose ``active``/``ready``
  counts show the run has started). The launcher pod (container ``node``, the MPI plugin's
  name) carries JobSet's labels ``jobset.sigs.k8s.io/jobset-name=<trainjob>`` and
  ``jobset.sigs.k8s.io/replicatedjob-name=launcher`` (the JobSet is named after the
  TrainJob).

:meth:`Backend.phase` normalises both to ``Pending``, ``Created``, ``Running``,
``Restarting``, ``Suspended``, ``Succeeded``, ``Failed``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.spec import crd, mpijob, trainjob

SUCCEEDED, FAILED = "Succeeded", "Failed"
TERMINAL = (SUCCEEDED, FAILED)


def true_condition(obj: Mapping, ctype: str) -> dict | None:
    """The ``status.conditions`` entry of type ``ctype`` with status ``"True"``, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


@dataclass(frozen=True)
class Backend:
    """One job kind the launcher follows (see the module docstring).

    Attributes:
        name: ``"mpijob"`` or ``"trainjob"`` (the component's ``backend`` parameter).
        group / version / kind / plural: the custom resource.
        success / failure: condition types that end the job.
        launcher_container: container whose log is the run's log.
        launcher_selector: job name -> label selector of its launcher pod(s).
        pods_selector: job name -> label selector of all its pods (MPIJob: the operator's
            ``training.kubeflow.org/job-name``; TrainJob: JobSet's
            ``jobset.sigs.k8s.io/jobset-name``, the JobSet being named after the TrainJob).
        build: options -> the job dict (:func:`kfp_gpu.mpi.spec.mpijob.build`,
            :func:`kfp_gpu.mpi.spec.trainjob.build`).
    """

    name: str
    group: str
    version: str
    kind: str
    plural: str
    success: str
    failure: str
    launcher_container: str
    launcher_selector: Callable[[str], str]
    pods_selector: Callable[[str], str]
    build: Callable[..., dict]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def matches(self, obj: Mapping) -> bool:
        """True if ``obj`` is of this backend's apiVersion and kind."""
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    def terminal_condition(self, obj: Mapping) -> dict | None:
        """The True success or failure condition of ``obj``, or None."""
        return true_condition(obj, self.failure) or true_condition(obj, self.success)

    def phase(self, obj: Mapping) -> str:
        """``Succeeded``/``Failed`` from the terminal conditions, else ``Suspended`` (a True
        Suspended condition), else the latest True condition (MPIJob: Created, Running,
        Restarting), else for a TrainJob ``Running`` when a replicated job has an active
        or ready pod and ``Created`` otherwise, else ``Pending``."""
        if true_condition(obj, self.failure):
            return FAILED
        if true_condition(obj, self.success):
            return SUCCEEDED
        if true_condition(obj, "Suspended"):
            return "Suspended"
        status = obj.get("status") or {}
        conds = [c for c in status.get("conditions") or [] if c.get("status") == "True"]
        if conds:
            return conds[-1]["type"]
        if self.name == "trainjob" and (obj.get("metadata") or {}).get("uid"):
            jobs = status.get("jobsStatus") or []
            busy = any((j.get("active") or 0) + (j.get("ready") or 0) > 0 for j in jobs)
            return "Running" if busy else "Created"
        return "Pending"


MPIJOB = Backend(
    name="mpijob", group=crd.GROUP, version=crd.VERSION, kind=crd.KIND,
    plural=crd.PLURAL, success="Succeeded", failure="Failed",
    launcher_container="launcher",
    launcher_selector=lambda name: f"{crd.JOB_NAME_LABEL}={name},{crd.JOB_ROLE_LABEL}=launcher",
    pods_selector=lambda name: f"{crd.JOB_NAME_LABEL}={name}",
    build=mpijob.build)

TRAINJOB = Backend(
    name="trainjob", group=trainjob.GROUP, version=trainjob.VERSION, kind=trainjob.KIND,
    plural=trainjob.PLURAL, success="Complete", failure="Failed",
    launcher_container=trainjob.NODE_CONTAINER, launcher_selector=trainjob.launcher_selector,
    pods_selector=lambda name: f"{trainjob.JOBSET_NAME_LABEL}={name}",
    build=trainjob.build)

BACKENDS = {b.name: b for b in (MPIJOB, TRAINJOB)}


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        ValueError: ``name`` is not ``mpijob`` or ``trainjob``.
    """
    if name not in BACKENDS:
        raise ValueError(f"invalid backend {name!r}; accepted: "
                         f"{', '.join(repr(b) for b in BACKENDS)} (mpijob: MPI Operator "
                         "v2beta1 MPIJob; trainjob: Kubeflow Trainer v2 TrainJob)")
    return BACKENDS[name]


def for_object(obj: Mapping) -> Backend:
    """The backend whose apiVersion/kind ``obj`` has.

    Raises:
        ValueError: ``obj`` is neither a ``kubeflow.org/v2beta1`` MPIJob nor a
            ``trainer.kubeflow.org/v1alpha1`` TrainJob.
    """
    for b in BACKENDS.values():
        if b.matches(obj):
            return b
    accepted = ", ".join(f"{b.api_version} {b.kind}" for b in BACKENDS.values())
    raise ValueError(f"expected one of {accepted}, got {obj.get('apiVersion')} "
                     f"{obj.get('kind')}")
