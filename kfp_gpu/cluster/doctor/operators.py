"""Doctor, subject operators: is the MPI Operator running? A CRD shows it is installed,
not that a controller acts on MPIJobs; without one an MPIJob stays without pods forever.

The controller holds a ``coordination.k8s.io/v1`` Lease named ``mpi-operator`` in its
``--lock-namespace`` (github.com/kubeflow/mpi-operator v0.8.2 cmd/mpi-operator/app/
server.go: leader election is always on, ``controllerName = "mpi-operator"``,
``leaseDuration = 15 * time.Second``, renewed every few seconds; options.go: the lock
namespace defaults to ``mpi-operator``, installs put it in their own namespace). A Lease
whose ``renewTime`` is younger than twice its ``leaseDurationSeconds`` has a live leader.
Leases are listed across namespaces (``list leases``; a 403 is reported as unknown).
"""

from __future__ import annotations

import datetime as dt

from kfp_gpu.cluster.doctor.model import (
    ClusterFacts,
    Needs,
    OperatorFacts,
    Report,
    api_error,
    list_named,
)

#: mpi-operator's Lease name (v0.8.2 app/server.go ``controllerName``).
MPI_OPERATOR_LEASE = "mpi-operator"


def fresh(age_s: float, duration_s: int) -> bool:
    """A Lease renewed ``age_s`` seconds ago with ``leaseDurationSeconds`` ``duration_s``
    still has a live holder (renewed within two lease durations)."""
    return age_s <= 2 * max(duration_s, 1)


def operators_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The Operators table; a problem when an MPIJob pipeline finds no live MPI Operator."""
    op = facts.operators
    if not op.read and not op.error:
        return
    rows = [(f"mpi-operator (Lease {ns}/{MPI_OPERATOR_LEASE})",
             f"leader {holder or '-'}, renewed {age:.0f} s ago"
             + ("" if fresh(age, dur) else f" (stale: lease {dur} s)"))
            for ns, holder, age, dur in op.leases]
    if op.error:
        rows.append(("mpi-operator", f"? {op.error}"))
    elif not op.leases:
        rows.append(("mpi-operator", f"no Lease {MPI_OPERATOR_LEASE} in any namespace"))
    rep.sections.append(("Operators", ("controller", "status"), rows))
    if not (needs.mpi and needs.backend == "mpijob") or op.error:
        return
    if not any(fresh(age, dur) and holder for _, holder, age, dur in op.leases):
        rep.problems.append("the MPI Operator is not running (no Lease mpi-operator renewed "
                            "lately): MPIJobs would be created but never get pods; start its "
                            "Deployment (manifests/mpi-operator)")


def read_operators(api_client, facts: ClusterFacts,
                   now: dt.datetime | None = None) -> None:
    """List Leases named ``mpi-operator`` into ``facts.operators`` (never raises)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    now = now or dt.datetime.now(dt.timezone.utc)
    op = OperatorFacts()
    try:
        for item in list_named(client.CoordinationV1Api(api_client).list_lease_for_all_namespaces,
                               MPI_OPERATOR_LEASE):
            spec = item.get("spec") or {}
            renewed = spec.get("renewTime")
            age = ((now - dt.datetime.fromisoformat(renewed.replace("Z", "+00:00")))
                   .total_seconds() if renewed else float("inf"))
            op.leases.append((item["metadata"]["namespace"], spec.get("holderIdentity", ""),
                              age, int(spec.get("leaseDurationSeconds") or 15)))
        op.read = True
    except ApiException as e:
        op.error = api_error(e)
    except Exception as e:  # noqa: BLE001 - doctor reports, never raises
        op.error = str(e)
    facts.operators = op
