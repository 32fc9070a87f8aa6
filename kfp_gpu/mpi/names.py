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


def job_name(run_id: str, task_name: str, prefix: str = "mpijob") -> str:
    """Deterministic DNS-1123 label for the MPIJob of one pipeline task.

    ``<prefix>-<first 10 hex of sha256(run_id + "/" + task_name)>``: the same run and task
    always give the same name (so a retried launcher re-attaches instead of creating a
    duplicate), different runs or tasks give different names. The prefix is lower-cased,
    characters outside ``[a-z0-9-]`` become ``-`` and it is cut to 24 characters.

    Raises:
        ValueError: if ``run_id`` or ``task_name`` is empty.
    """
    if not run_id or not task_name:
        raise ValueError("job_name needs a non-empty run_id and task_name")
    digest = hashlib.sha256(f"{run_id}/{task_name}".encode()).hexdigest()[:10]
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
            "use kfp_gpu.mpi.names.job_name(run_id, task_name)")
    return name
