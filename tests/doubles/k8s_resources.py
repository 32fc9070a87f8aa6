"""What the Kubernetes API double serves, and the operators it plays.

:data:`SERVED`: the custom resources of :class:`tests.doubles.k8s_api.FakeKube`, one row
each (group, version, kind, plural, scope, read-only, status subresource), as their CRDs
declare them:

- ``mpijobs.kubeflow.org`` ``v2beta1`` MPIJob, namespaced, status subresource
  (kubeflow/mpi-operator ``manifests/base/kubeflow.org_mpijobs.yaml``);
- ``trainjobs.trainer.kubeflow.org`` ``v1alpha1`` TrainJob, namespaced, status subresource
  (kubeflow/trainer v2.3.0 ``manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml``);
- ``clustertrainingruntimes.trainer.kubeflow.org`` ``v1alpha1`` ClusterTrainingRuntime,
  cluster-scoped; read-only here (tests seed them with ``FakeKube.put_object``);
- ``resourceclaimtemplates.resource.k8s.io`` ``v1`` ResourceClaimTemplate (built in, not a
  CRD), namespaced, no status: what a ``dra`` job's launcher creates.
- ``leases.coordination.k8s.io`` ``v1`` Lease (built in), namespaced, no status, read-only:
  an operator's leader Lease, which the launcher reads (tests renew it).

:data:`OPERATORS`: how each job kind's controller shows progress, for
:class:`ScriptedController`:

- MPI Operator (``pkg/controller/mpi_job_controller.go``): JobCondition types Created,
  Running, Succeeded / Failed (reasons ``MPIJobCreated``...), launcher pod labelled
  ``training.kubeflow.org/job-name`` / ``job-role: launcher``, container ``launcher``.
  Read at kubeflow/mpi-operator HEAD caa3c47 (2026-07-02; the snapshot has no v0.8.2 tag,
  only v0.8.0): messages "MPIJob <ns>/<name> is created." (line 616, event
  ``MPIJobCreated`` 618), "... is running." (1190), "... successfully completed." (1123),
  "... has failed" (1210); labels ``JobNameLabel`` / ``JobRoleLabel``
  (``pkg/apis/kubeflow/v2beta1/constants.go`` lines 42, 45); the objects it owns carry
  ``metav1.NewControllerRef`` (lines 1373, 1427, 1468: ``blockOwnerDeletion: true``),
  which the API double gives the pods it creates for a job.
- Kubeflow Trainer v2.3.0 on JobSet: a TrainJob has no Created/Running condition (its types
  are Suspended, Complete, Failed: ``pkg/apis/trainer/v1alpha1/trainjob_types.go``); the
  JobSet plugin copies JobSet's terminal conditions (``plugins/jobset/jobset.go`` Status():
  ``Completed`` -> ``Complete`` with reason ``AllJobsCompleted``, ``Failed`` with e.g.
  ``FailedJobs`` / ``ReachedMaxRestarts``, JobSet ``pkg/constants``) and ``jobsStatus`` per
  replicated job. The launcher pod ``<job>-launcher-0-0-<5 chars>`` is labelled
  ``jobset.sigs.k8s.io/jobset-name=<job>``, ``jobset.sigs.k8s.io/replicatedjob-name=launcher``;
  its container is ``node`` (the MPI plugin's name, ``pkg/constants`` ``Node``).
Conditions are written in the kind's own shape: MPIJob ``JobCondition`` (with
``lastUpdateTime``), TrainJob ``metav1.Condition`` (``lastTransitionTime`` only).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.doubles.k8s_api import FakeKube


@dataclass(frozen=True)
class Served:
    """One custom resource the double serves."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    read_only: bool = False
    status_subresource: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


SERVED: dict[str, Served] = {s.plural: s for s in (
    Served("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
    Served("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
    Served("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime",
           "clustertrainingruntimes", namespaced=False, read_only=True,
           status_subresource=False),
    # A built-in kind, served the same way: namespaced, no status (k8s.io/api v0.36.3
    # resource/v1/types.go ResourceClaimTemplate has metadata and spec only).
    Served("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates",
           status_subresource=False),
    # The operators' leader-election Leases (k8s.io/api v0.36.3 coordination/v1 types.go:
    # spec.holderIdentity, leaseDurationSeconds, renewTime), read by the launcher's
    # reconcile check; read-only here (tests make and renew them: FakeKube.renew_lease).
    Served("coordination.k8s.io", "v1", "Lease", "leases", read_only=True,
           status_subresource=False),
)}


def served(group: str, version: str, plural: str) -> Served | None:
    """The :data:`SERVED` row for ``/apis/<group>/<version>/.../<plural>``, or None."""
    s = SERVED.get(plural)
    return s if s is not None and (s.group, s.version) == (group, version) else None


@dataclass(frozen=True)
class Operator:
    """How one job kind's controller reports progress (see the module docstring)."""

    plural: str
    created: tuple[str, str] | None  # (condition type, reason) once the pods exist
    running: tuple[str, str] | None
    succeeded: tuple[str, str, str]  # (type, reason, message)
    failed: tuple[str, str, str]
    launcher_labels: Callable[[str], dict]
    launcher_container: str
    launcher_pod: Callable[[str], str]
    job_condition_shape: bool  # JobCondition (lastUpdateTime) vs metav1.Condition
    worker_labels: Callable[[str], dict] = lambda name: {}
    worker_pod: Callable[[str], str] = lambda name: f"{name}-worker-0"
    #: ``Suspended`` condition (reason, message) while suspended and after resuming.
    suspended_reason: tuple[str, str] = ("MPIJobSuspended", "MPIJob suspended")
    resumed_reason: tuple[str, str] = ("MPIJobResumed", "MPIJob resumed")


def suspended(job: dict) -> bool:
    """The job's suspend flag: MPIJob ``spec.runPolicy.suspend`` (kubeflow/mpi-operator
    v0.8.2 ``mpi_job_controller.go`` ``isMPIJobSuspended``), TrainJob ``spec.suspend``
    (kubeflow/trainer v2.3.0 ``trainjob_types.go``)."""
    spec = job.get("spec") or {}
    return bool((spec.get("runPolicy") or {}).get("suspend") or spec.get("suspend"))


OPERATORS: dict[str, Operator] = {
    "mpijobs": Operator(
        "mpijobs", ("Created", "MPIJobCreated"), ("Running", "MPIJobRunning"),
        ("Succeeded", "MPIJobSucceeded", "MPIJob {ns}/{name} successfully completed."),
        # the Launcher Job's Failed condition as updateMPIJobFailedStatus copies it (a
        # failed Launcher fails its Job by backoffLimit; ``MPIJobFailed`` only when the
        # Job's condition has no reason): see ScriptedController.failure
        ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        lambda name: {"training.kubeflow.org/job-name": name,
                      "training.kubeflow.org/job-role": "launcher"},
        "launcher", lambda name: f"{name}-launcher-{uuid.uuid4().hex[:5]}", True,
        lambda name: {"training.kubeflow.org/job-name": name,
                      "training.kubeflow.org/job-role": "worker"},
        lambda name: f"{name}-worker-0"),
    "trainjobs": Operator(
        "trainjobs", None, None,
        ("Complete", "AllJobsCompleted", "jobset completed successfully"),
        # manifests/trainer's runtime has a failurePolicy (maxRestarts 0): JobSet v0.12.0
        # failure_policy.go fails with ReachedMaxRestarts naming the first failed Job
        ("Failed", "ReachedMaxRestarts", ("jobset failed due to reaching max number of "
                                          "restarts (first failed job: {name}-launcher-0)")),
        lambda name: {"jobset.sigs.k8s.io/jobset-name": name,
                      "jobset.sigs.k8s.io/replicatedjob-name": "launcher",
                      "jobset.sigs.k8s.io/job-index": "0",
                      "batch.kubernetes.io/job-completion-index": "0"},
        "node", lambda name: f"{name}-launcher-0-0-{uuid.uuid4().hex[:5]}", False,
        lambda name: {"jobset.sigs.k8s.io/jobset-name": name,
                      "jobset.sigs.k8s.io/replicatedjob-name": "node"},
        lambda name: f"{name}-node-0-0-{uuid.uuid4().hex[:5]}",
        # kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go
        # (TrainJobSuspendedReason / TrainJobResumedReason), pkg/constants/constants.go
        ("Suspended", "TrainJob is suspended"), ("Resumed", "TrainJob is resumed")),
}


@dataclass
class ScriptedController:
    """Plays the operator of each job created (MPIJob or TrainJob, :data:`OPERATORS`).

    Attributes:
        outcome: ``"Succeeded"``, ``"Failed"`` or ``None`` (stays running until deleted).
        log: launcher log lines, appended one per ``step_s`` while running.
        reason / message: of the terminal condition (Failed: e.g. ``BackoffLimitExceeded``).
        step_s: seconds between steps.
        gate: if set, the controller waits for it before the terminal condition (tests use it
            to expire watches while the job runs).
        pending: if set, a Worker pod (MPIJob ``<job>-worker-0``; TrainJob a ``node`` pod)
            is created first with this pod ``status`` (API JSON: an Unschedulable
            ``PodScheduled`` condition, a waiting container...) and the job stays before
            Running (MPIJob: Created only; TrainJob: ``jobsStatus`` active, none ready) for
            ``pending_s`` seconds (None: until deleted), with ``pending_events`` (reason,
            message) as Warning Events about that pod; then it runs as usual.
        grace_s: how long a Launcher pod that the failing Job deletes (restartPolicy
            OnFailure) stays readable first: kubelet's graceful termination keeps a deleted
            pod, and its log, until its containers stop (terminationGracePeriodSeconds,
            30 s by default; k8s.io/api core/v1), so a launcher following the log reads it
            to the end.
    """

    outcome: str | None = "Succeeded"
    log: list[str] = field(default_factory=lambda: ["launcher started"])
    reason: str = ""
    message: str = ""
    step_s: float = 0.02
    gate: threading.Event | None = None
    plural: str = "mpijobs"  # set by FakeKube for each job it starts
    pending: dict | None = None
    pending_s: float | None = None
    pending_events: list[tuple[str, str]] = field(default_factory=list)
    grace_s: float = 5.0

    def run(self, kube: FakeKube, ns: str, name: str) -> None:
        op = OPERATORS[self.plural]

        def alive() -> bool:
            obj = kube.get_object(op.plural, ns, name)
            return obj is not None and not obj["metadata"].get("deletionTimestamp")

        def cond(ctype: str, reason: str, message: str, **kw) -> None:
            kube.set_condition(ns, name, ctype, reason, message, plural=op.plural, **kw)

        time.sleep(self.step_s)
        if not alive():
            return
        if op.created:
            cond(*op.created, f"{kube_kind(op.plural)} {ns}/{name} is created.")
            # syncHandler's Event with it (v0.8.2: "MPIJob <ns>/<name> is created.")
            kube.add_event(ns, name, "Normal", op.created[1], f"MPIJob {ns}/{name} is created.")
        if not self._stay_suspended(kube, ns, name, alive):
            return
        if self.pending is not None and not self._stay_pending(kube, ns, name, alive):
            return
        pod = op.launcher_pod(name)
        kube.create_pod(ns, pod, op.launcher_labels(name), owner=name,
                        container=op.launcher_container, owner_plural=op.plural)
        time.sleep(self.step_s)
        if not alive():
            return
        kube.set_pod_phase(ns, pod, "Running")
        if op.running:
            cond(*op.running, f"{kube_kind(op.plural)} {ns}/{name} is running.")
            # updateMPIJobStatus's Eventf: the same words without the full stop
            kube.add_event(ns, name, "Normal", op.running[1], f"MPIJob {ns}/{name} is running")
        if self.plural == "trainjobs":
            kube.set_jobs_status(ns, name, active=1, ready=1)
        for line in self.log:
            if not alive():
                return
            kube.append_log(ns, pod, line)
            time.sleep(self.step_s)
        if self.gate is not None:
            self.gate.wait(30)
        if self.outcome is None or not alive():
            return
        ok = self.outcome == "Succeeded"
        ctype, reason, message = op.succeeded if ok else self.failure(kube, ns, name)
        reason, message = self.reason or reason, self.message or message.format(ns=ns,
                                                                                 name=name)
        deleted_by_job = not (ok or self.plural == "trainjobs"
                              or self._launcher_policy(kube, ns, name) == "Never")
        if not deleted_by_job:
            kube.set_pod_phase(ns, pod, "Succeeded" if ok else "Failed")
        # the Event the controller records with the condition: on the MPIJob
        # (updateMPIJobStatus / updateMPIJobFailedStatus), on the JobSet for a TrainJob
        # (JobSet v0.12.0 jobset_controller.go; Trainer records none)
        kube.add_event(ns, name, "Normal" if ok else "Warning", reason, message,
                       kind="JobSet" if self.plural == "trainjobs" else "MPIJob")
        if self.plural == "trainjobs":
            kube.set_jobs_status(ns, name, active=0, succeeded=int(ok), failed=int(not ok))
        cond(ctype, reason, message, running_false=True)
        if deleted_by_job:  # OnFailure: restarted in place, deleted by the failing Job,
            end = time.monotonic() + self.grace_s  # readable while it terminates
            while time.monotonic() < end and alive():
                time.sleep(0.02)
            kube.delete_pod(ns, pod)

    @staticmethod
    def _launcher_policy(kube: FakeKube, ns: str, name: str) -> str:
        """The MPIJob Launcher's ``restartPolicy`` (mpi-operator v0.8.2 default OnFailure)."""
        obj = kube.get_object("mpijobs", ns, name) or {}
        spec = ((obj.get("spec") or {}).get("mpiReplicaSpecs") or {}).get("Launcher") or {}
        return spec.get("restartPolicy") or "OnFailure"

    def failure(self, kube: FakeKube, ns: str, name: str) -> tuple[str, str, str]:
        """The Failed condition (type, reason, message template) a failed launcher gives.

        MPIJob: kubeflow/mpi-operator v0.8.2 ``updateMPIJobFailedStatus`` copies the
        Launcher Job's ``BackoffLimitExceeded`` and appends ``/<pod status.reason>`` and
        ``: <pod status.message>`` of the last Failed Launcher pod when one is left: under
        ``restartPolicy: Never`` (empty fields for a container exit:
        ``BackoffLimitExceeded/``); under OnFailure the kubelet restarts in place and the
        Job controller deletes the pod, so nothing is appended (both seen on the real
        control plane, tests/cluster/test_fidelity.py)."""
        op = OPERATORS[self.plural]
        if self.plural == "mpijobs" and self._launcher_policy(kube, ns, name) == "Never":
            return op.failed[0], op.failed[1] + "/", op.failed[2] + ": "
        return op.failed


    def _stay_suspended(self, kube: FakeKube, ns: str, name: str, alive) -> bool:
        """While the job's suspend flag is set (Kueue holds it until admission), create no
        pods and show ``Suspended`` True; on resume, ``Suspended`` False with the resumed
        reason. kubeflow/mpi-operator v0.8.2 (branch release-0.8 b10758d)
        ``pkg/controller/mpi_job_controller.go``: ``syncHandler`` creates no PodGroup and
        no Workers while ``isMPIJobSuspended`` (lines 665-675; the Launcher Job is created,
        itself suspended, lines 677-679 and 1576-1577: no pod either);
        ``updateMPIJobStatus``: ``JobSuspended`` True ``MPIJobSuspended`` "MPIJob
        suspended", then False ``MPIJobResumed`` "MPIJob resumed" with ``startTime`` set
        at the resume (lines 1096-1107), and ``Running`` False ``MPIJobSuspended``
        "MPIJob <ns>/<name> is suspended." while suspended (lines 1166-1168). Kueue admits
        the job by setting ``runPolicy.suspend`` false (kubernetes-sigs/kueue v0.19.2
        ``pkg/controller/jobs/mpijob/mpijob_controller.go`` ``RunWithPodSetsInfo``, line
        136). Trainer's TrainJob controller likewise (reasons ``Suspended``/``Resumed``).
        False once the job is gone."""
        op = OPERATORS[self.plural]
        obj = kube.get_object(op.plural, ns, name)
        if obj is None or not suspended(obj):
            return True
        kube.set_condition(ns, name, "Suspended", *op.suspended_reason, plural=op.plural)
        if op.job_condition_shape:  # MPIJob: Running False while suspended (lines 1166-1168)
            kube.set_condition(ns, name, "Running", op.suspended_reason[0],
                               f"MPIJob {ns}/{name} is suspended.", plural=op.plural,
                               truth="False")
        while True:
            obj = kube.get_object(op.plural, ns, name)
            if not alive() or obj is None:
                return False
            if not suspended(obj):
                break
            time.sleep(0.02)
        kube.set_condition(ns, name, "Suspended", *op.resumed_reason, plural=op.plural,
                           truth="False")
        return True

    def _stay_pending(self, kube: FakeKube, ns: str, name: str, alive) -> bool:
        """Show a Worker pod that does not start (see ``pending``); False once the job is
        gone, True when ``pending_s`` has passed (the pod then runs)."""
        op = OPERATORS[self.plural]
        worker = op.worker_pod(name)
        kube.create_pod(ns, worker, op.worker_labels(name), owner=name, container="worker",
                        owner_plural=op.plural)
        kube.set_pod_status(ns, worker, self.pending)
        for reason, message in self.pending_events:
            kube.add_event(ns, worker, "Warning", reason, message, kind="Pod")
        if self.plural == "trainjobs":
            kube.set_jobs_status(ns, name, active=1)  # pending pods count as active
        end = None if self.pending_s is None else time.monotonic() + self.pending_s
        while end is None or time.monotonic() < end:
            if not alive():
                return False
            time.sleep(0.02)
        kube.set_pod_status(ns, worker, {"phase": "Running"})
        return alive()


def kube_kind(plural: str) -> str:
    return SERVED[plural].kind
