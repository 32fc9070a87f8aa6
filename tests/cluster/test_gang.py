"""(k) Gang plumbing through the real mpi-operator v0.8.2 with ``--gang-scheduling=<name>``
(cmd/mpi-operator/app/options/options.go): the operator creates a scheduler-plugins
PodGroup (scheduling.x-k8s.io/v1alpha1, CRD from sigs.k8s.io/scheduler-plugins v0.34.7)
per MPIJob and sets every pod's schedulerName to <name> (pkg/controller/podgroup.go
``newPodGroup``, ``decoratePodTemplateSpec``). kube-scheduler runs a second profile of
that name (tests/cluster/controlplane.py GANG_SCHEDULER), so the pods are scheduled.
This checks the PodGroup's sizes against kfp_gpu.mpi.spec.scheduling.implied_pod_group
(our reading of podgroup.go), not all-or-nothing placement: that needs the
scheduler-plugins coscheduling plugin, which is not built here.
"""

from __future__ import annotations

import pytest

from kfp_gpu.mpi.spec import scheduling
from testcluster.controlplane import GANG_SCHEDULER
from tests.cluster import jobs, kube


@pytest.fixture(scope="module")
def gang_operator(plane):
    """mpi-operator restarted with --gang-scheduling; the plain one again afterwards."""
    plane.stop_process("mpi-operator")
    plane.start_mpi_operator(gang_scheduling=GANG_SCHEDULER)
    yield
    plane.stop_process("mpi-operator")
    plane.start_mpi_operator()


@pytest.mark.parametrize("min_available", [0, 2])
def test_podgroup_min_member_is_what_we_derive(plane, api, namespace, tmp_path,
                                               gang_operator, min_available):
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
