"""Gang scheduling of an MPIJob: ``spec.runPolicy.schedulingPolicy`` (no I/O).

Field names and meaning follow github.com/kubeflow/mpi-operator
``pkg/apis/kubeflow/v2beta1/types.go`` (``SchedulingPolicy``; the published CRD
``manifests/base/kubeflow.org_mpijobs.yaml`` v0.8.2 carries the same fields): the operator
copies them into the PodGroup it creates when it runs with gang scheduling
(``--gang-scheduling=volcano`` or ``scheduler-plugins``); without it they are ignored.

==========================  ==========================================================
``min_available``           ``minAvailable``: PodGroup ``minMember`` (default: the
                            number of Workers, plus the Launcher)
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
