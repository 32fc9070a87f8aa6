"""(k) Gang plumbing through the real mpi-operator v0.8.2 with ``--gang-scheduling=<name>``
(cmd/mpi-operator/app/options/options.go): the operator creates a scheduler-plugins
PodGroup (scheduling.x-k8s.io/v1alpha1, CRD from sigs.k8s.io/scheduler-plugins v0.34.7)
per MPIJob and sets every pod's schedulerName to <name> (pkg/controller/podgroup.go
``newPodGroup``, ``decoratePodTemplateSpec``). kube-scheduler runs a second profile of
that name (testcluster/controlplane.py GANG_SCHEDULER), so the pods are scheduled.
This checks the PodGroup's sizes against kfp_gpu.mpi.spec.scheduling.implied_pod_group
(our reading of podgroup.go), not all-or-nothing placement: that needs the
scheduler-plugins coscheduling plugin, which is not built here.

The gang operator is its own: a plane of its own (tier 1 without the plain operator) whose
mpi-operator runs with ``--gang-scheduling`` in a network namespace of its own
(testcluster/netns.py: v0.8.2 binds its health check to ``:8080``, server.go
``healthCheckPort``, which the session plane's operator holds). The session plane's
operator is never stopped or restarted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kfp_gpu.mpi.spec import scheduling
from testcluster import controlplane, netns
from testcluster.controlplane import GANG_SCHEDULER
from tests.cluster import jobs, kube


def _operator_pid(p: controlplane.Plane) -> int:
    return int(p.pid_file("mpi-operator").read_text())


@pytest.fixture(scope="module")
def gang_plane(plane) -> Iterator[controlplane.Plane]:
    """A tier-1 plane of its own whose only mpi-operator runs with --gang-scheduling in
    its own network namespace; down afterwards, its namespace gone."""
    where = controlplane.scratch_dir("kfp-gpu-gang-")
    p = controlplane.up(where, name=f"kfp-gpu-{uuid.uuid4().hex[:6]}", mpi_operator=False)
    try:
        p.start_mpi_operator(gang_scheduling=GANG_SCHEDULER, own_network=True)
        yield p
    finally:
        nets = netns.recorded(where)
        controlplane.down(where)
    assert nets and not any(netns.exists(n.name) for n in nets), \
        f"down left the gang operator's network namespace: {[n.name for n in nets]}"
    assert not Path(where).exists()


@pytest.fixture(scope="module")
def gang_client(gang_plane):
    from kfp_gpu.kube import api_client

    c = api_client(str(gang_plane.kubeconfig))
    yield c
    c.close()


@pytest.mark.parametrize("min_available", [0, 2])
def test_podgroup_min_member_is_what_we_derive(plane, gang_plane, gang_client, tmp_path,
                                               min_available):
    session_operator = _operator_pid(plane)
    api = gang_client
    namespace = f"t-gang-{min_available}-{uuid.uuid4().hex[:5]}"
    kube.create_namespace(api, namespace)
    name = "resnet-gang"
    job = jobs.component_job(namespace, name, workers=3, min_available=min_available)
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    expected = scheduling.implied_pod_group(job)
    run = jobs.Launch(api, job, tmp_path / "record.json")
    run.start()
    pg = kube.wait_for(lambda: kube.get_custom(api, "scheduling.x-k8s.io", "v1alpha1",
                                               namespace, "podgroups", name), 60, "PodGroup")
    assert pg["spec"]["minMember"] == expected["minMember"]
    # Under WaitForWorkersReady only the Workers exist before the Launcher: the gang fits.
    assert expected["creatable_before_launcher"] >= expected["minMember"]
    pod = jobs.launcher_pod(api, namespace, name)
    assert pod.spec.scheduler_name == GANG_SCHEDULER
    workers = jobs.worker_pods(api, namespace, name)
    assert len(workers) == 3
    assert {p.spec.scheduler_name for p in workers} == {GANG_SCHEDULER}
    assert all(p.spec.node_name for p in workers)  # the second profile placed them
    jobs.end_launcher(api, namespace, name, "succeed")
    _, error = run.outcome()
    assert error is None, error
    # the session plane's operator ran on untouched beside the gang plane's
    assert plane.running("mpi-operator") and _operator_pid(plane) == session_operator
