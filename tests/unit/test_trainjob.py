"""TrainJob builder: one options model, two outputs.

Every option combination of the MPIJob tests (every GPU request kind, RDMA on/off, PVCs)
builds a TrainJob that validates against the upstream Trainer v2.3.0 CRD (strict), and the
pods Kubeflow Trainer would make from it -- the runtime of manifests/trainer with the
TrainJob's runtimePatches merged (strategic merge by name, as
pkg/runtime/core/trainingruntime.go mergeRuntimePatches), resourcesPerNode and trainer.env
applied to the "node" containers and trainer.image/command to the launcher (plugins/jobset
builder.go) -- are valid Kubernetes 1.30 pods that carry what the MPIJob's Worker carries.
"""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from kfp_gpu.mpi.spec import mpijob, network, ssh, trainjob
from kfp_gpu.mpi.spec.options import MPIJobOptions
from kfp_gpu.mpi.spec.volumes import PvcMount, SecretMount
from tests.support import upstream_crds
from tests.support.merge_patch import smp
from tests.support.mpijob_options import REQUESTS, every_option, golden_options, options

RUNTIME = yaml.safe_load((Path(__file__).resolve().parents[2] / "manifests" / "trainer"
                          / "horovod-runtime.yaml").read_text())


def effective_pod(job: dict, rjob: str) -> dict:
    """The pod template Trainer makes for replicated job ``rjob`` of ``job``."""
    spec = RUNTIME["spec"]["template"]["spec"]
    for patch in job["spec"].get("runtimePatches", []):
        spec = smp(spec, patch["trainingRuntimeSpec"]["template"]["spec"])
    (rj,) = [r for r in spec["replicatedJobs"] if r["name"] == rjob]
    pod = copy.deepcopy(rj["template"]["spec"]["template"])
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    trainer = job["spec"]["trainer"]
    if rjob == "launcher":  # the trainer-ancestor job
        c["image"], c["command"] = trainer["image"], trainer["command"]
    c["env"] = smp(c.get("env", []), trainer.get("env", []), "env")
    c["resources"] = smp(c.get("resources", {}), trainer.get("resourcesPerNode", {}))
    return pod


def validate_pod(template: dict) -> None:
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
         "template": template}, "1.30.0", strict=True)


def node(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


@pytest.mark.parametrize("rdma", [True, False], ids=["rdma", "no-rdma"])
@pytest.mark.parametrize("kind", list(REQUESTS))
def test_every_request_kind_validates_and_matches_the_mpijob(kind, rdma):
    opts = every_option(kind, rdma)
    job = trainjob.build(opts)
    upstream_crds.validate(job)
    worker = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    wc = node(worker)
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == opts.slots()
    launcher = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"][0]["command"]
    wait, mpirun = launcher[:launcher.index("--") + 1], launcher[launcher.index("--") + 1:]
    # the MPIJob Launcher's wait (here for the other nodes' sshd and its own hostfile name
    # to resolve), then its mpirun; with RDMA through the Worker's memlock check, since the
    # TrainJob launcher is node 0 and hosts ranks
    start = [ssh.IMAGE_PYTHON, "-m", "kfp_gpu.training.worker_start"] if rdma else []
    assert trainer["command"] == [*wait, *start, *mpirun]
    for rjob in ("node", "launcher"):
        pod = effective_pod(job, rjob)
        validate_pod(pod)
        c = node(pod)
        assert c["resources"] == wc["resources"]  # GPU, RDMA, CPU, memory on every node
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env == {e["name"]: e["value"] for e in wc["env"]}
        assert c.get("securityContext") == wc.get("securityContext")  # no IPC_LOCK (uid 1000)
        for key in ("tolerations", "nodeSelector"):
            assert pod["spec"].get(key) == worker["spec"].get(key), key
        meta = pod["metadata"]
        assert meta.get("labels", {}) == worker["metadata"].get("labels", {})
        want = {**worker["metadata"].get("annotations", {}), "sidecar.istio.io/inject": "false"}
        if "gpu-fraction-container-name" in want:  # KAI: the GPU container of each pod
            want["gpu-fraction-container-name"] = "node"
        assert meta["annotations"] == want
        assert {v["name"]: v for v in pod["spec"]["volumes"]}["dshm"] == {
            "name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
        assert "schedulerName" not in pod["spec"]


@pytest.mark.parametrize("kind", ["none", "gpu", "mig", "fraction"])
def test_pvcs_reach_every_node(kind):
    vols = (PvcMount("resnet-shared", "/mnt/shared"),
            PvcMount("datasets.v2", "/data", read_only=True, sub_path="imagenet"))
    opts = options(gpu=REQUESTS[kind], volumes=vols, fs_group=1000)
    job = trainjob.build(opts)
    upstream_crds.validate(job)
    worker = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    for rjob in ("node", "launcher"):
        pod = effective_pod(job, rjob)
        validate_pod(pod)
        assert pod["spec"]["volumes"] == worker["spec"]["volumes"]
        assert node(pod)["volumeMounts"] == node(worker)["volumeMounts"]


def test_secret_volumes_reach_every_node():
    """The Secret volume is on every pod of both replicated jobs (the launcher is node 0
    and hosts ranks), read-only at the same path, next to the PVCs."""
    vols = (PvcMount("resnet-shared", "/mnt/shared"),)
    secret = SecretMount("gcp-sa", "/var/secrets/google")
    opts = options(gpu=REQUESTS["gpu"], volumes=vols, secret_volumes=(secret,), fs_group=1000)
    job = trainjob.build(opts)
    upstream_crds.validate(job)
    worker = mpijob.build(opts)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    for rjob in ("node", "launcher"):
        pod = effective_pod(job, rjob)
        validate_pod(pod)
        assert secret.volume() in pod["spec"]["volumes"]
        assert {"name": "secret-gcp-sa", "mountPath": "/var/secrets/google",
                "readOnly": True} in node(pod)["volumeMounts"]
        assert pod["spec"]["volumes"] == worker["spec"]["volumes"]
        assert node(pod)["volumeMounts"] == node(worker)["volumeMounts"]


def golden() -> MPIJobOptions:
    """The MPIJob golden options, with the runPolicy the runtime fixes (ttl 1 day, no
    retries): a TrainJob cannot carry another (test_what_a_trainjob_cannot_carry...)."""
    return golden_options().replace(ttl_seconds_after_finished=86400, backoff_limit=0)


def test_golden_options_read_as_intended():
    job = trainjob.build(golden())
    upstream_crds.validate(job)
    assert job["metadata"] == {
        "name": golden().name, "namespace": "ml",
        "labels": {"app.kubernetes.io/managed-by": "kfp-gpu"},
        "annotations": {"kfp-gpu/pipeline-run-id": "run-0123",
                        "kfp-gpu/task-name": "train-resnet-horovod"}}
    spec = job["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org",
                                  "kind": "ClusterTrainingRuntime", "name": "kfp-gpu-horovod"}
    assert spec["activeDeadlineSeconds"] == 7200
    t = spec["trainer"]
    assert (t["numNodes"], t["numProcPerNode"]) == (4, 8)
    assert t["command"][t["command"].index("-np") + 1] == "32"
    assert t["resourcesPerNode"]["limits"] == {
        "cpu": "90", "memory": "900Gi", "nvidia.com/gpu": "8",
        network.RDMA_HCA_SHARED_DEVICES_A: "1"}
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == trainjob.PATCH_MANAGER
    jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node", "launcher"]
    pod = jobs[0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][network.MULTUS_ANNOTATION] == "ml/rdma-net@net1"
    assert pod["spec"]["serviceAccountName"] == "horovod-ranks"
    assert trainjob.launcher_selector("x") == (
        "jobset.sigs.k8s.io/jobset-name=x,jobset.sigs.k8s.io/replicatedjob-name=launcher")


def test_no_per_job_pod_settings_means_no_patch():
    job = trainjob.build(options(gpu="none"))
    assert "runtimePatches" not in job["spec"]
    upstream_crds.validate(job)


def test_same_options_same_trainjob():
    assert trainjob.build(golden()) == trainjob.build(golden())


def test_the_runtime_and_the_builder_agree():
    mpi = RUNTIME["spec"]["mlPolicy"]["mpi"]
    assert mpi["sshAuthMountPath"] == trainjob.RUNTIME_FIXED[("ssh", "ssh_auth_mount_path")][0]
    assert mpi["runLauncherAsNode"] is True
    assert RUNTIME["metadata"]["name"] == trainjob.DEFAULT_RUNTIME
    names = [r["name"] for r in RUNTIME["spec"]["template"]["spec"]["replicatedJobs"]]
    assert tuple(names) == trainjob.REPLICATED_JOBS


@pytest.mark.parametrize("change,accepted", [
    ({"mpi_implementation": "Intel"}, "OpenMPI"),
    ({"ssh": ssh.ROOT_SSH}, "/home/mpiuser/.ssh"),
    ({"scheduler_name": "kai-scheduler"}, "runtimePatches cannot set it"),
    ({"clean_pod_policy": "All"}, "'Running'"),
    ({"backoff_limit": 3}, "accepted: 0"),
    ({"ttl_seconds_after_finished": 3600}, "accepted: 86400"),
    ({"launcher_creation_policy": "AtStartup"}, "WaitForWorkersReady"),
    ({"fs_group": 2000}, "None or 1000"),
    ({"env": {"OMPI_MCA_plm_rsh_args": "-p 22"}}, "set by the Trainer's MPI plugin"),
    ({"workers": 0}, "workers must be an integer >= 1"),
    ({"queue": "gpu-queue"}, "spec.podGroupPolicy"),
    ({"min_available": 2}, "schedulingPolicy {'minAvailable': 2}"),
])
def test_what_a_trainjob_cannot_carry_is_refused(change, accepted):
    with pytest.raises(ValueError) as e:
        trainjob.build(options(**change))
    assert accepted in str(e.value)


def test_what_the_mpi_plugin_adds_for_the_local_runner():
    assert trainjob.pod_hostnames("j", 3) == ["j-node-0-0.j", "j-node-0-1.j",
                                              "j-launcher-0-0.j"]
    assert trainjob.pod_hostnames("j", 1) == ["j-node-0-0.j", "j-launcher-0-0.j"]  # upstream
    assert trainjob.hostfile("j", 2, 8, subdomain="net") == (
        "j-node-0-0.net slots=8\nj-launcher-0-0.net slots=8\n")
    env = trainjob.launcher_env(8)
    assert set(env) == set(trainjob.RESERVED_ENV)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    with pytest.raises(ValueError, match="num_nodes must be an integer >= 1"):
        trainjob.pod_hostnames("j", 0)


def test_one_worker_warns_about_the_idle_node_pod(caplog):
    with caplog.at_level("WARNING", logger="kfp_gpu.mpi.spec.trainjob"):
        job = trainjob.build(options(workers=1))
    assert job["spec"]["trainer"]["numNodes"] == 1
    assert "workers=1" in caplog.text and "idle" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="kfp_gpu.mpi.spec.trainjob"):
        trainjob.build(options(workers=2))
    assert caplog.text == ""


# -- trainer.image reaches the launcher only ---------------------------------------------


def test_a_job_image_other_than_the_runtimes_is_refused_at_build_time():
    """Kubeflow Trainer v2.3.0 plugins/jobset/builder.go Trainer() (l. 113-139) sets
    trainer.image on the trainer-ancestor job only (the launcher; the node job keeps the
    runtime's image): with another image the launcher and the ranks would run different
    code (kubeflow/trainer issue 2825), so build refuses it with the fixes."""
    opts = options()
    assert trainjob.build(opts, runtime_image=opts.image)["spec"]["trainer"]["image"] == \
        opts.image
    with pytest.raises(ValueError, match="kubeflow/trainer issue 2825") as e:
        trainjob.build(opts, runtime_image="registry.example.com/ml/kfp-gpu-horovod:0.1.0")
    msg = str(e.value)
    assert repr(opts.image) in msg and "launcher only" in msg
    assert "kfp-gpu compile --registry R -o DIR" in msg
    assert f"kustomize edit set image registry.example.com/ml/kfp-gpu-horovod={opts.image}" in msg
    assert "runtime copy" in msg and "'mpijob'" in msg
    # the runtime manifest's node image is what the check compares with
    job = trainjob.build(opts)  # None: the caller vouches (unchecked)
    node_image = trainjob.runtime_node_image(RUNTIME)
    assert node_image == RUNTIME["spec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]["containers"][0]["image"]
    trainjob.check_runtime_image({**job, "spec": {"trainer": {"image": node_image}}}, RUNTIME)
    with pytest.raises(ValueError, match="differs from the node image"):
        trainjob.check_runtime_image({**job, "spec": {"trainer": {"image": "other:1"}}},
                                     RUNTIME)


def test_the_builder_models_upstreams_image_rule():
    """What effective_pod (this file's model of Trainer) does with trainer.image is what
    check_image guards against: launcher on the job's image, nodes on the runtime's."""
    opts = options()
    job = trainjob.build(opts)
    job["spec"]["trainer"]["image"] = "other:1"
    assert node(effective_pod(job, "launcher"))["image"] == "other:1"
    assert node(effective_pod(job, "node"))["image"] == trainjob.runtime_node_image(RUNTIME)
