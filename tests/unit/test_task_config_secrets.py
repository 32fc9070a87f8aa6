"""``kfp-gpu compile --secret-volume/--secret-env`` -> the TaskConfig the KFP 2.17 driver
hands train_resnet_horovod -> the MPIJob and the TrainJob it builds.

The resnet-horovod pipeline is compiled here with the GCS recipe of docs/cluster.md
(``--secret-volume gcp-sa:/var/secrets/google:key.json``) and the S3 preset
(``--secret-env s3-creds``); :func:`driver_task_config` turns the compiled task into the
TaskConfig as kubeflow/pipelines 2.17.0 ``backend/src/v2/driver`` does with the task's
``taskConfigPassthroughs`` (:mod:`tests.support.kfp_driver`). The job must then mount the Secret on
the Launcher and every Worker (every TrainJob pod) where ``GOOGLE_APPLICATION_CREDENTIALS``
points, and forward that variable.
"""

from __future__ import annotations

import pytest

from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.dsl import task_settings
from kfp_gpu.mpi.spec import backends, volumes
from tests.support import upstream_crds
from tests.support.kfp_driver import compiled_task, driver_task_config

SECRET, DIR, KEY = "gcp-sa", "/var/secrets/google", "key.json"
IMAGE = "registry.test/kfp-gpu-horovod:1"


@pytest.fixture(scope="module")
def settings() -> dict:
    s = task_settings.from_options(secret_env=["s3-creds"],
                                   secret_volume=[f"{SECRET}:{DIR}:{KEY}"])
    return rt.worker_settings(driver_task_config(*compiled_task(s)))


def job(settings: dict, backend) -> dict:
    opts = rt.job_options(
        name="resnet-gcs", namespace="ml", image=IMAGE, args=["--mode", "train"], workers=2,
        settings=settings, rdma=False, rdma_resource="rdma/rdma_shared_device_a",
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="", run_id="r", task_name="train-resnet-horovod")
    return rt.build_job(backend, opts, runtime_image=IMAGE)


def test_the_compiled_secret_volume_reaches_the_component_settings(settings):
    assert settings["secret_volumes"] == (volumes.SecretMount(SECRET, DIR),)
    assert settings["volumes"] == ()
    assert settings["env"]["GOOGLE_APPLICATION_CREDENTIALS"] == f"{DIR}/{KEY}"
    assert rt.unmounted_credentials(settings["env"], settings["volumes"],
                                    settings["secret_volumes"]) is None
    assert {e["name"] for e in settings["secret_env"]} == {
        *task_settings.AWS_REQUIRED, *task_settings.AWS_OPTIONAL}


def test_the_mpijob_mounts_it_on_the_launcher_and_every_worker(settings):
    mj = job(settings, backends.MPIJOB)
    upstream_crds.validate(mj, strict=True)
    specs = mj["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        pod = specs[role]["template"]["spec"]
        (c,) = pod["containers"]
        assert {"name": f"secret-{SECRET}", "secret": {"secretName": SECRET}} in pod["volumes"]
        assert {"name": f"secret-{SECRET}", "mountPath": DIR, "readOnly": True} in \
            c["volumeMounts"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["GOOGLE_APPLICATION_CREDENTIALS"] == f"{DIR}/{KEY}"
    cmd = specs["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[cmd.index("GOOGLE_APPLICATION_CREDENTIALS") - 1] == "-x"


def test_the_trainjob_mounts_it_on_every_pod(settings):
    tj = job(settings, backends.TRAINJOB)
    upstream_crds.validate(tj, strict=True)
    (patch,) = tj["spec"]["runtimePatches"]
    rjobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [r["name"] for r in rjobs] == ["node", "launcher"]
    for rjob in rjobs:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert {"name": f"secret-{SECRET}", "secret": {"secretName": SECRET}} in pod["volumes"]
        assert pod["containers"] == [{"name": "node", "volumeMounts": [
            {"name": f"secret-{SECRET}", "mountPath": DIR, "readOnly": True}]}]
    assert {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{DIR}/{KEY}"} in \
        tj["spec"]["trainer"]["env"]
