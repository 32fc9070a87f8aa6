"""MPIJob names: a deterministic name per pipeline task, and the checks a name must pass.

Upstream rules: github.com/kubeflow/mpi-operator ``pkg/apis/kubeflow/validation/
validation.go`` (validateMPIJobName: pod hostnames ``<name>-launcher`` / ``<name>-worker-<i>``
must be DNS-1123 labels; the operator also creates a Service named after the job, so the
name must be a DNS-1035 label); Kubernetes ``apimachinery/pkg/util/validation`` (DNS-1123
label/subdomain, DNS-1035 label).
"""

from __future__ import annotations

import hashlib
import re

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Service names (the MPI Operator creates a Service named after the MPIJob).
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

#: Longest name accepted for an MPIJob: ``<name>-launcher`` and ``<name>-worker-<i>`` must
#: stay DNS-1123 labels (63 characters) -- validation.go validateMPIJobName.
MAX_NAME_LEN = 40


def job_name(run_id: str, task_name: str, *, prefix: str = "mpijob",
             instance: str = "") -> str:
    """Deterministic DNS-1123 label for the MPIJob of one pipeline task.

    ``prefix`` and ``instance`` are keyword-only: both are strings, and an instance given
    where the prefix goes would silently name two iterations' jobs alike.

    ``<prefix>-<first 10 hex of sha256(run_id + "/" + task_name [+ "/" + instance])>``: the
    same run, task and instance always give the same name (so a retried launcher
    re-attaches instead of creating a duplicate), different runs, tasks or instances give
    different names. The prefix is lower-cased, characters outside ``[a-z0-9-]`` become
    ``-`` and it is cut to 24 characters.

    ``instance`` tells apart the runs of one task inside one run: the iterations of a
    ``dsl.ParallelFor`` (and the calls of one sub-pipeline) share the run id and the task
    name. It must be the same for every retry of the task and differ between iterations.
    In the KFP v2 backend (>= 2.5) the URI of a task's output artifact is such a key: the
    driver provisions it once per task execution as
    ``<pipeline root>/<task name>/<uuid>/<output>`` (kubeflow/pipelines
    ``backend/src/v2/driver/container.go`` ``provisionOutputs(..., uuid.NewString(), ...)``,
    ``driver/driver.go`` ``provisionOutputs``), and Argo's retries of the executor pod run
    with the same executor input. ``dsl.PIPELINE_TASK_ID_PLACEHOLDER`` (the parent DAG's
    execution id, ``driver/resolve.go``: per iteration, shared by sibling tasks) works too.
    The pod's name (``KFP_POD_NAME``, ``compiler/argocompiler/common.go`` ``commonEnvs``)
    does not: each retry is a new pod. Empty = no instance (names as before).

    Raises:
        ValueError: if ``run_id`` or ``task_name`` is empty.
    """
    if not run_id or not task_name:
        raise ValueError("job_name needs a non-empty run_id and task_name")
    key = f"{run_id}/{task_name}" + (f"/{instance}" if instance else "")
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    clean = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:24].strip("-") or "mpijob"
    if not clean[0].isalpha():  # DNS-1035: the operator's Service takes the job's name
        clean = f"mpijob-{clean}"[:24].strip("-")
    return f"{clean}-{digest}"


def check_name(name: str, workers: int = 1) -> str:
    """Return ``name`` if it is a usable MPIJob name, else raise ``ValueError``.

    Usable: a DNS-1035 label (starts with a letter: the MPI Operator creates a Service
    named after the MPIJob) of at most :data:`MAX_NAME_LEN` characters such that the pod
    hostnames ``<name>-launcher`` and ``<name>-worker-<workers-1>`` are DNS-1123 labels.
    """
    longest = f"{name}-worker-{max(workers, 1) - 1}"
    if (not DNS1035_LABEL.match(name or "") or len(name) > MAX_NAME_LEN
            or len(longest) > 63 or len(f"{name}-launcher") > 63):
        raise ValueError(
            f"invalid MPIJob name {name!r}: accepted are DNS-1035 labels (lower-case "
            f"letters, digits, '-', starting with a letter and ending alphanumeric: the MPI "
            f"Operator names a Service after the job) of at most {MAX_NAME_LEN} characters; "
            "use kfp_gpu.mpi.spec.names.job_name(run_id, task_name)")
    return name
