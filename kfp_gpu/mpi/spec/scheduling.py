"""Gang scheduling of an MPIJob: ``spec.runPolicy.schedulingPolicy`` (no I/O).

Field names and meaning follow github.com/kubeflow/mpi-operator
``pkg/apis/kubeflow/v2beta1/types.go`` (``SchedulingPolicy``; the published CRD
``manifests/base/kubeflow.org_mpijobs.yaml`` v0.8.2 carries the same fields): the operator
copies them into the PodGroup it creates when it runs with gang scheduling
(``--gang-scheduling=volcano`` or ``scheduler-plugins``); without it they are ignored.

==========================  ==========================================================
``min_available``           ``minAvailable``: PodGroup ``minMember`` (operator default:
                            Workers + 1, the Launcher counted; the MPIJob builder
                            defaults it to the Workers under ``WaitForWorkersReady``,
                            see :func:`default_min_available`)
``queue``                   ``queue``: Volcano queue (not passed to scheduler-plugins)
``min_resources``           ``minResources``: PodGroup ``minResources`` (scheduler-plugins)
``priority_class``          ``priorityClass``: PodGroup ``priorityClassName`` (Volcano)
``schedule_timeout_seconds``  ``scheduleTimeoutSeconds`` (scheduler-plugins only)
==========================  ==========================================================

A TrainJob cannot carry any of them: Kubeflow Trainer v2.3 keeps gang scheduling on the
runtime (``ClusterTrainingRuntime.spec.podGroupPolicy``: ``coscheduling.
scheduleTimeoutSeconds`` or ``volcano.networkTopology``), and ``runtimePatches`` patch
only the JobSet template (kubeflow/trainer v2.3.0 ``pkg/apis/trainer/v1alpha1/
trainingruntime_types.go``, ``trainjob_types.go``): :func:`kfp_gpu.mpi.spec.trainjob.check_options`
refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kfp_gpu.mpi.spec.checks import positive_int
from kfp_gpu.mpi.spec.names import DNS1123_SUBDOMAIN

#: The quantity pattern of the CRD's ``minResources`` (apimachinery resource.Quantity).
_QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                       r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
#: A resource name: ``cpu``, ``memory``, ``nvidia.com/gpu`` (a qualified name).
_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                       r"[A-Za-z0-9])?$")


@dataclass(frozen=True)
class SchedulingPolicy:
    """``runPolicy.schedulingPolicy`` (see the module docstring); empty/None = unset."""

    min_available: int | None = None
    queue: str = ""
    min_resources: Mapping[str, str] = field(default_factory=dict)
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None

    def is_set(self) -> bool:
        """True when any field is set (the job then carries a ``schedulingPolicy``)."""
        return bool(self.to_spec())

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        for name in ("min_available", "schedule_timeout_seconds"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        for name in ("queue", "priority_class"):
            value = getattr(self, name)
            if value and (not isinstance(value, str) or not DNS1123_SUBDOMAIN.match(value)):
                raise ValueError(f"invalid {name} {value!r}: accepted are object names "
                                 "(DNS-1123 subdomains such as 'gpu-queue')")
        if not isinstance(self.min_resources, Mapping):
            # ValueError, not TypeError: the options' one error type for bad input
            raise ValueError(  # noqa: TRY004
                "min_resources must be a mapping of resource name to quantity, "
                "e.g. {'nvidia.com/gpu': '16'}")
        for key, value in self.min_resources.items():
            if not _RESOURCE.match(str(key)) or not _QUANTITY.match(str(value)):
                raise ValueError(f"invalid min_resources entry {key!r}: {value!r}; accepted: "
                                 "resource names mapped to quantities, e.g. "
                                 "{'nvidia.com/gpu': '16', 'cpu': '64'}")

    def to_spec(self) -> dict[str, Any]:
        """The ``schedulingPolicy`` dict (unset fields left out; empty when nothing is set)."""
        out: dict[str, Any] = {}
        for key, value in (("minAvailable", self.min_available), ("queue", self.queue),
                           ("minResources", dict(sorted((str(k), str(v)) for k, v in
                                                        self.min_resources.items()))),
                           ("priorityClass", self.priority_class),
                           ("scheduleTimeoutSeconds", self.schedule_timeout_seconds)):
            if value not in (None, "", {}):
                out[key] = value
        return out


def default_min_available(workers: int, launcher_creation_policy: str) -> int | None:
    """The ``minAvailable`` the MPIJob builder sets when none is given: the Worker count
    when the Launcher waits for the Workers (``WaitForWorkersReady``), else None.

    Why: without it the operator's PodGroup counts the Launcher (``minMember`` = Workers +
    1, :func:`implied_pod_group`), but under ``WaitForWorkersReady`` the Launcher is only
    created once every Worker is Ready, and a gang scheduler (Volcano, scheduler-plugins
    coscheduling) binds no Worker until ``minMember`` pods exist: a deadlock
    (kubeflow/mpi-operator issue 608, open; its workaround is ``minAvailable`` = Workers).
    Without gang scheduling the operator ignores ``schedulingPolicy``.
    """
    return workers if launcher_creation_policy == "WaitForWorkersReady" else None


def implied_pod_group(job: Mapping) -> dict[str, Any]:
    """The PodGroup sizes mpi-operator v0.8.2 derives from an MPIJob ``dict`` (pure mirror
    of ``pkg/controller/podgroup.go``, release v0.8.2: branch release-0.8 b10758d, the same
    controller code as master's "Prepare v0.8.2" caa3c47):

    - ``minMember``: ``calculateMinAvailable`` (lines 392-397):
      ``schedulingPolicy.minAvailable`` if set, else Worker replicas + 1 (the Launcher);
      the same for Volcano (``newPodGroup`` line 113) and scheduler-plugins (line 249);
    - ``counted``: replicas per role that ``calPGMinResource`` (lines 337-388) sums into
      ``minResources`` when ``schedulingPolicy.minResources`` is unset (given, it is used
      as is: ``calculatePGMinResources`` lines 176-186 and 317-326): with Launcher +
      Workers > ``minMember`` and equal priorities, the Workers are cut to
      ``minMember - 1`` (so ``minResources`` then counts one Worker's GPUs too few; set
      ``min_resources`` to state the gang's full request); ``minMember`` 0 derives no
      ``minResources`` at all (``counted`` empty). The builder sets no
      ``priorityClassName`` on the pod templates, so the equal-priority branch is the
      one taken;
    - ``creatable_before_launcher``: the pods that exist before the Launcher under
      ``launcherCreationPolicy`` (``WaitForWorkersReady``: the Workers only,
      ``mpi_job_controller.go`` ``syncHandler``; ``AtStartup``: all).

    The gang can start only if ``creatable_before_launcher >= minMember``.
    """
    spec = job.get("spec") or {}
    replicas = spec.get("mpiReplicaSpecs") or {}
    workers = int((replicas.get("Worker") or {}).get("replicas") or 0)
    launchers = 1 if "Launcher" in replicas else 0
    policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
    min_member = policy.get("minAvailable", workers + 1)
    counted = {"Launcher": launchers, "Worker": workers}
    if "minResources" not in policy and min_member == 0:
        counted = {}
    elif "minResources" not in policy and launchers + workers > min_member:
        counted["Worker"] = min_member - 1
    waits = spec.get("launcherCreationPolicy", "AtStartup") == "WaitForWorkersReady"
    return {"minMember": min_member, "counted": counted,
            "creatable_before_launcher": workers if waits else workers + launchers}
