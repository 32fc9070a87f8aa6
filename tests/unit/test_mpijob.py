"""MPIJob builder: schema validity for every GPU request kind, RDMA on/off, golden spec,
mpirun command, names, and the ValueErrors for bad input."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kfp_gpu import gpu
from kfp_gpu.mpi.spec import mpijob, mpirun, names, network, scheduling, ssh, volumes
from tests.support import upstream_crds
from tests.support.mpijob_options import REQUESTS, every_option, golden_options, options

TESTS = Path(__file__).resolve().parents[1]
#: Rules the v0.8.2 CRD's openAPIV3Schema does not encode (Launcher replicas 1, Worker
#: replicas >= 1, restartPolicy/cleanPodPolicy enums, backoffLimit >= 0, DNS-1035 name, no
#: extra replica types); mpi-operator checks them in Go (pkg/apis/kubeflow/validation; path to
#: be re-read). The CRD itself is read in place (tests/support/upstream_crds.py).
CONTROLLER_RULES = json.loads((TESTS / "schemas" / "mpijob-v2beta1.schema.json").read_text())
GOLDEN = TESTS / "golden" / "mpijob_rdma_gpu8.yaml"
#: Kubernetes version the pod templates are validated against (kubernetes client 30.x
#: speaks the 1.30 API).
K8S_VERSION = "1.30.0"

def validate_pod_template(template: dict) -> None:
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
         "template": template}, K8S_VERSION, strict=True)


REJECTED = (upstream_crds.CRDValidationError, jsonschema.ValidationError, KeyError)


def validate_mpijob(job: dict) -> None:
    """Against the upstream MPIJob CRD read in place (kubeflow/mpi-operator
    manifests/base/kubeflow.org_mpijobs.yaml via tests/support/upstream_crds.py), strict: the CRD does
    not reject unknown keys (the API server prunes them), so strict mode adds that check."""
    upstream_crds.validate(job, strict=True)
    jsonschema.Draft202012Validator(CONTROLLER_RULES).validate(job)


def test_every_kind_is_covered():
    assert {gpu.parse(t).kind for t in REQUESTS.values()} == set(REQUESTS)


@pytest.mark.parametrize("rdma", [True, False], ids=["rdma", "no-rdma"])
@pytest.mark.parametrize("kind", list(REQUESTS))
def test_every_request_kind_validates(kind, rdma):
    req = gpu.parse(REQUESTS[kind])
    opts = every_option(kind, rdma)
    job = mpijob.build(opts)
    validate_mpijob(job)
    for role in ("Launcher", "Worker"):
        validate_pod_template(job["spec"]["mpiReplicaSpecs"][role]["template"])

    spec = job["spec"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]
    container = worker["spec"]["containers"][0]
    res = container.get("resources", {})
    frag = req.pod_fragment()
    # the GPU request reaches the workers, requests == limits for extended resources
    for name, qty in frag["resources"]["limits"].items():
        assert res["limits"][name] == qty and res["requests"][name] == qty
    # slotsPerWorker = devices per pod; -np = workers * slots
    assert spec["slotsPerWorker"] == max(1, req.gpus_per_pod)
    cmd = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[cmd.index("-np") + 1] == str(2 * max(1, req.gpus_per_pod))
    # annotations, labels, tolerations, selectors of the request and of the options
    meta = worker["metadata"]
    for k, v in frag["annotations"].items():
        # KAI's container name is the Worker's container here, not KFP's "main"
        assert meta["annotations"][k] == ("worker" if k == "gpu-fraction-container-name" else v)
    for k, v in frag["labels"].items():
        assert meta["labels"][k] == v
    for t in frag["tolerations"]:
        assert t in worker["spec"]["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml",
            "effect": "NoSchedule"} in worker["spec"]["tolerations"]
    assert worker["spec"]["nodeSelector"] == {
        **frag["nodeSelector"], "node.kubernetes.io/instance-type": "p5.48xlarge"}
    env = {e["name"]: e["value"] for e in container["env"]}
    for e in frag["env"]:
        assert env[e["name"]] == e["value"]
        assert e["name"] in cmd[cmd.index("-x"):]  # forwarded to the ranks
    # the Launcher gets no GPU
    launcher_res = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "resources"]
    assert set(launcher_res["limits"]) == {"cpu", "memory"}
    # RDMA on/off
    caps = container.get("securityContext", {}).get("capabilities", {}).get("add", [])
    if rdma:
        assert res["limits"][network.RDMA_SHARED_DEVICE_A] == "1"
        # the default Workers run as uid 1000: IPC_LOCK would lift nothing for them and
        # only make Pod Security baseline reject the pod
        assert caps == []
        assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and env["NCCL_NET_GDR_LEVEL"] == "PHB"
        assert meta["annotations"][network.MULTUS_ANNOTATION] == "rdma-net"
        assert "NCCL_IB_DISABLE" not in env
    else:
        assert not any(k.startswith("rdma/") for k in res.get("limits", {}))
        assert caps == []
        assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env
        assert network.MULTUS_ANNOTATION not in meta.get("annotations", {})
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    # Memory-backed /dev/shm on workers
    vols = {v["name"]: v for v in worker["spec"]["volumes"]}
    assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    # the Secret volume on the Launcher and the Workers, same path, read-only
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    for pod in (worker["spec"], launcher):
        assert {"name": "secret-gcp-sa", "secret": {"secretName": "gcp-sa"}} in pod["volumes"]
        assert {"name": "secret-gcp-sa", "mountPath": "/var/secrets/google",
                "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_golden_full_spec():
    """The full RDMA spec, byte for byte. Regenerate with KFP_GPU_UPDATE_GOLDEN=1."""
    text = mpijob.to_yaml(mpijob.build(golden_options()))
    if os.environ.get("KFP_GPU_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    job = yaml.safe_load(text)
    validate_mpijob(job)
    for role in ("Launcher", "Worker"):
        validate_pod_template(job["spec"]["mpiReplicaSpecs"][role]["template"])


def test_golden_reads_as_intended():
    """Independent of the golden bytes: the key settings of the Mellanox-deck layout."""
    job = mpijob.build(golden_options())
    spec = job["spec"]
    assert job["apiVersion"] == "kubeflow.org/v2beta1" and job["kind"] == "MPIJob"
    assert spec["slotsPerWorker"] == 8
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 3600,
                                 "backoffLimit": 1, "activeDeadlineSeconds": 7200,
                                 "schedulingPolicy": {"minAvailable": 4}}  # the 4 Workers
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    cmd = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[:3] == ["/opt/venv/bin/python", "-m", "kfp_gpu.training.launcher_start"]
    cmd = cmd[cmd.index("--") + 1:]
    assert cmd[:4] == ["mpirun", "--allow-run-as-root", "-np", "32"]
    joined = " ".join(cmd)
    assert "-bind-to none" in joined and "-map-by slot" in joined
    forwarded = {cmd[i + 1] for i, a in enumerate(cmd) if a == "-x"}
    assert {"NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG",
            "HOROVOD_FUSION_THRESHOLD", "PATH", "LD_LIBRARY_PATH"} <= forwarded
    assert cmd[-4:] == ["kfp-gpu", "train-resnet", "--mode", "benchmark"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]
    assert worker["spec"]["containers"][0]["resources"]["limits"][
        "rdma/hca_shared_devices_a"] == "1"
    assert job["metadata"]["annotations"] == {"kfp-gpu/pipeline-run-id": "run-0123",
                                              "kfp-gpu/task-name": "train-resnet-horovod"}


def test_schema_rejects_what_the_operator_rejects():
    """The schema is not vacuous: each mutation breaks a v2beta1/controller rule."""
    good = mpijob.build(options(gpu="gpu:1"))
    validate_mpijob(good)
    mutations = [
        ("spec", "slotsPerWorkers", 1),                       # misspelt field
        ("spec", "launcherCreationPolicy", "WaitForWorkers"),
        ("spec", "mpiImplementation", "MVAPICH"),
        ("spec.runPolicy", "cleanPodPolicy", "Always"),
        ("spec.runPolicy", "backoffLimit", -1),
        ("spec.runPolicy", "ttlSecondsAfterFinished", 2 ** 31),
        ("spec.mpiReplicaSpecs.Launcher", "replicas", 2),
        ("spec.mpiReplicaSpecs.Worker", "replicas", 0),
        ("spec.mpiReplicaSpecs.Worker", "restartPolicy", "Always"),
        ("spec.mpiReplicaSpecs", "Chief", {"replicas": 1}),
        ("metadata", "name", "Resnet_1"),
        ("", "apiVersion", "kubeflow.org/v1"),
    ]
    for path, key, value in mutations:
        job = json.loads(json.dumps(good))
        node = job
        for part in filter(None, path.split(".")):
            node = node[part]
        node[key] = value
        with pytest.raises(REJECTED):
            validate_mpijob(job)
    job = json.loads(json.dumps(good))
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    with pytest.raises(REJECTED):
        validate_mpijob(job)


def test_pod_template_schema_is_strict():
    template = mpijob.build(options(gpu="gpu:1"))["spec"]["mpiReplicaSpecs"]["Worker"][
        "template"]
    template["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": "IPC_LOCK"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_pod_template(template)


def test_names_are_deterministic_dns_labels():
    a = names.job_name("run-1", "train")
    assert a == names.job_name("run-1", "train")
    assert a != names.job_name("run-2", "train") != names.job_name("run-1", "train-2")
    long = names.job_name("r" * 300, "Task With Spaces/and_underscores" * 5,
                           prefix="My_Very Long Prefix For A ResNet Job!")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)
    assert names.check_name(long, workers=1000) == long
    assert len(f"{long}-worker-999") <= 63
    # prefix and instance are keyword-only: a model URI given third must not become the
    # prefix (two ParallelFor iterations would get one name)
    with pytest.raises(TypeError, match="positional"):
        names.job_name("run-1", "train", "gs://root/train/uuid-1/model")
    assert names.job_name("run-1", "train", instance="gs://root/train/uuid-1/model") != \
        names.job_name("run-1", "train", instance="gs://root/train/uuid-2/model")


@pytest.mark.parametrize("bad", ["Upper", "under_score", "-lead", "trail-", "", "a" * 41,
                                 "1lead", "0-resnet"])
def test_bad_names_are_refused(bad):
    with pytest.raises(ValueError, match="DNS-1035.*starting with a letter"):
        mpijob.build(options(name=bad))


def test_job_name_starts_with_a_letter_whatever_the_prefix():
    for prefix in ("8bit", "-9", "resnet", ""):
        name = names.job_name("run", "task", prefix=prefix)
        assert name[0].isalpha() and names.check_name(name) == name


@pytest.mark.parametrize("field,value,accepted", [
    ("workers", 0, ">= 1"),
    ("slots_per_worker", 0, ">= 1"),
    ("clean_pod_policy", "Always", "'Running', 'All', 'None'"),
    ("launcher_creation_policy", "Eager", "'AtStartup', 'WaitForWorkersReady'"),
    ("mpi_implementation", "MVAPICH", "'OpenMPI', 'Intel', 'MPICH'"),
    ("nccl_debug", "LOUD", "'VERSION', 'WARN', 'INFO', 'TRACE'"),
    ("nccl_net_gdr_level", "NEAR", "'LOC', 'PIX', 'PXB', 'PHB', 'SYS'"),
    ("rdma_resource", "nvidia.com/rdma", "rdma/rdma_shared_device_a"),
    ("nccl_ib_hca", "mlx5 0", "mlx5_0,mlx5_1"),
    ("nccl_socket_ifname", "eth 0", "'eth0'"),
    ("multus_networks", "Bad_Net", "namespace/]name"),
    ("shm_size", "lots", "'16Gi'"),
    ("backoff_limit", -1, "non-negative"),
    ("active_deadline_seconds", 0, ">= 1"),
    ("gpu", "gpu:1.5", "accepted"),
    ("program", (), "argv"),
    ("env", {"1BAD": "x"}, "C identifiers"),
    ("namespace", "Bad NS", "DNS-1123"),
    ("scheduler_name", "Kai Scheduler", "kai-scheduler"),
    ("worker_command", "sshd -De", "argv"),
    ("run_as_user", -1, "uid/gid"),
    ("fs_group", "1000", "uid/gid"),
])
def test_bad_options_name_the_accepted_values(field, value, accepted):
    with pytest.raises(ValueError) as e:
        mpijob.build(options(**{field: value}))
    assert accepted in str(e.value)


def test_explicit_slots_and_scheduler():
    job = mpijob.build(options(gpu="fraction:0.25", slots_per_worker=4,
                               scheduler_name="kai-scheduler", workers=3))
    assert job["spec"]["slotsPerWorker"] == 4
    cmd = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "command"]
    assert cmd[cmd.index("-np") + 1] == "12"
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"][
        "schedulerName"] == "kai-scheduler"


def test_mpirun_other_implementations():
    cmd = mpirun.mpirun_command(4, ["python", "t.py"], forwarded_env=["NCCL_DEBUG"],
                                implementation="Intel")
    assert cmd == ["mpirun", "-n", "4", "-genvlist", "LD_LIBRARY_PATH,PATH,NCCL_DEBUG",
                   "python", "t.py"]


def test_same_options_same_job():
    assert mpijob.build(golden_options()) == mpijob.build(golden_options())


DOCKERFILE = TESTS.parent / "images" / "horovod" / "Dockerfile"


def test_defaults_fit_the_horovod_image():
    """The ssh layout the builder asks for is the one images/horovod/Dockerfile creates:
    the user it runs as, that user's .ssh (HostKey = the operator's id_rsa), the sshd
    config the Workers start, and port 2222 for both sshd and the ssh client of mpirun."""
    text = DOCKERFILE.read_text()
    uid, gid = re.search(r"^USER (\d+):(\d+)$", text, re.MULTILINE).groups()
    job = mpijob.build(options(gpu="gpu:8"))
    spec = job["spec"]
    for role in ("Launcher", "Worker"):
        pod = spec["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod["securityContext"] == {"runAsUser": int(uid), "runAsGroup": int(gid)}
    assert int(uid) == ssh.MPI_USER_ID
    home = re.search(r"--home (\S+) ", text).group(1)
    assert home == ssh.MPI_USER_HOME
    assert spec["sshAuthMountPath"] == f"{home}/.ssh"
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    cmd = worker["command"]
    # the image's own Python (its venv is on the image PATH too) starts sshd through
    # kfp_gpu.training.worker_start, a module the image installs
    venv = re.search(r"^COPY --from=\w+ (\S+/venv) \1$", text, re.MULTILINE).group(1)
    assert cmd[:3] == [f"{venv}/bin/python", "-m", "kfp_gpu.training.worker_start"]
    assert importlib.util.find_spec(cmd[2]) is not None
    assert cmd[3:5] == ["/usr/sbin/sshd", "-De"]
    sshd_config = cmd[cmd.index("-f") + 1]
    # the file the image writes, with the HostKey under sshAuthMountPath and the port
    assert f"> {sshd_config}" in text
    assert f"HostKey {spec['sshAuthMountPath']}/id_rsa" in text
    port = re.search(r"^ARG SSH_PORT=(\d+)$", text, re.MULTILINE).group(1)
    assert int(port) == ssh.SSH_PORT
    assert "Port %s" in text and '"${SSH_PORT}" > ' + sshd_config in text
    # mpirun's ssh client reaches port 2222 through the system ssh_config (no plm_rsh_args)
    assert re.search(r"\\1\$\{SSH_PORT\}/g\" /etc/ssh/ssh_config", text)


def test_root_ssh_layout_is_one_override_away():
    job = mpijob.build(options(gpu="gpu:2", rdma=True, ssh=ssh.ROOT_SSH))
    spec = job["spec"]
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    for role in ("Launcher", "Worker"):
        tpl = spec["mpiReplicaSpecs"][role]["template"]
        assert "securityContext" not in tpl["spec"]
        validate_pod_template(tpl)
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["python3", "-m", "kfp_gpu.training.worker_start",
                                 "/usr/sbin/sshd", "-De"]
    assert worker["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    # fsGroup for a shared volume the non-root ranks write to
    shared = mpijob.build(options(gpu="gpu:2", fs_group=1000))
    pod = shared["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert pod["spec"]["securityContext"]["fsGroup"] == 1000
    validate_pod_template(pod)


SHARED = volumes.PvcMount("resnet-shared", "/mnt/shared")
DATASETS = volumes.PvcMount("datasets.team-a", "/data", read_only=True, sub_path="fmnist")


@pytest.mark.parametrize("rdma", [True, False], ids=["rdma", "no-rdma"])
@pytest.mark.parametrize("kind", ["none", "gpu", "mig", "fraction"])
@pytest.mark.parametrize("volumes", [
    (SHARED,), (SHARED, DATASETS),
    (SHARED, volumes.PvcMount("resnet-shared", "/mnt/ckpt", sub_path="ckpt")),
], ids=["one", "two-claims", "one-claim-twice"])
def test_pvcs_are_mounted_on_workers_and_validate(volumes, kind, rdma):
    job = mpijob.build(options(gpu=REQUESTS[kind], rdma=rdma, volumes=volumes, fs_group=1000,
                               shm_size="8Gi"))
    validate_mpijob(job)
    for role in ("Launcher", "Worker"):
        validate_pod_template(job["spec"]["mpiReplicaSpecs"][role]["template"])
    pod = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    container = pod["containers"][0]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"]
              for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert sorted(claims.values()) == sorted({v.claim_name for v in volumes})
    assert len(pod["volumes"]) == len({v["name"] for v in pod["volumes"]})
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/dev/shm"]["name"] == "dshm"
    for v in volumes:
        m = mounts[v.mount_path]
        assert claims[m["name"]] == v.claim_name
        assert m.get("readOnly", False) is v.read_only
        assert m.get("subPath", "") == v.sub_path
    assert pod["securityContext"]["fsGroup"] == 1000
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert "volumes" not in launcher


def test_no_volumes_leaves_the_default_pod_unchanged():
    worker = mpijob.build(options(gpu="gpu:8"))["spec"]["mpiReplicaSpecs"]["Worker"]
    spec = worker["template"]["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["dshm"]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_long_or_dotted_claims_get_valid_volume_names():
    long = volumes.PvcMount("a" * 200, "/mnt/a")
    dotted = volumes.PvcMount("datasets.team-a", "/mnt/b")
    names = {long.volume_name(), dotted.volume_name()}
    assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n) and len(n) <= 63
               for n in names)
    assert len(names) == 2
    assert volumes.PvcMount("ws", "/w").volume_name() == "pvc-ws"
    validate_pod_template(mpijob.build(options(volumes=(long, dotted)))["spec"][
        "mpiReplicaSpecs"]["Worker"]["template"])


@pytest.mark.parametrize("volumes,accepted", [
    ((volumes.PvcMount("Shared_WS", "/mnt/s"),), "DNS-1123 subdomains"),
    ((volumes.PvcMount("x" * 254, "/mnt/s"),), "DNS-1123 subdomains"),
    ((volumes.PvcMount("ws", "mnt/s"),), "absolute paths"),
    ((volumes.PvcMount("ws", "/"),), "other than '/'"),
    ((volumes.PvcMount("ws", "/mnt/../etc"),), "normalised"),
    ((volumes.PvcMount("ws", "/mnt/s/"),), "normalised"),
    ((volumes.PvcMount("ws", "/mnt/a:b"),), "without ':'"),
    ((volumes.PvcMount("ws", "/mnt/s", sub_path="/abs"),), "relative paths"),
    ((volumes.PvcMount("ws", "/mnt/s", sub_path="a/../../b"),), "without '..'"),
    ((volumes.PvcMount("ws", "/dev/shm"),), "clashes with '/dev/shm'"),
    ((volumes.PvcMount("ws", "/dev"),), "clashes with '/dev/shm'"),
    ((volumes.PvcMount("ws", "/dev/shm/x"),), "clashes with '/dev/shm'"),
    ((volumes.PvcMount("ws", "/etc/mpi"),), "clashes with '/etc/mpi'"),
    ((volumes.PvcMount("ws", "/home/mpiuser/.ssh"),), "SSH key mount"),
    ((volumes.PvcMount("ws", "/home/mpiuser"),), "SSH key mount"),
    ((volumes.PvcMount("a", "/mnt/s"), volumes.PvcMount("b", "/mnt/s")), "duplicate"),
    (({"claim_name": "ws", "mount_path": "/mnt/s"},), "PvcMount("),
])
def test_bad_volumes_are_refused(volumes, accepted):
    with pytest.raises(ValueError) as e:
        mpijob.build(options(volumes=volumes))
    assert accepted in str(e.value)


def test_secret_volumes_go_to_the_launcher_and_every_worker_pvcs_to_the_workers():
    """A Secret (``kfp-gpu compile --secret-volume``) is mounted read-only at the same path
    on the Launcher (mpirun forwards ``GOOGLE_APPLICATION_CREDENTIALS`` from there) and on
    each Worker (the ranks read the file); a PVC only on the Workers."""
    key = volumes.SecretMount("gcp-sa", "/var/secrets/google")
    token = volumes.SecretMount("registry.token", "/etc/token", optional=True)
    pvc = volumes.PvcMount("ws", "/mnt/ws")
    job = mpijob.build(options(volumes=(pvc,), secret_volumes=(key, token),
                               env={"GOOGLE_APPLICATION_CREDENTIALS":
                                    "/var/secrets/google/key.json"}))
    validate_mpijob(job)
    specs = job["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        validate_pod_template(specs[role]["template"])
    launcher = specs["Launcher"]["template"]["spec"]
    worker = specs["Worker"]["template"]["spec"]
    dotted = token.volume_name()  # a dot is not allowed in a volume name (DNS-1123 label)
    assert re.fullmatch(r"secret-[0-9a-f]{12}", dotted)
    secret_vols = [{"name": "secret-gcp-sa", "secret": {"secretName": "gcp-sa"}},
                   {"name": dotted, "secret": {"secretName": "registry.token",
                                               "optional": True}}]
    secret_mounts = [{"name": "secret-gcp-sa", "mountPath": "/var/secrets/google",
                      "readOnly": True},
                     {"name": dotted, "mountPath": "/etc/token", "readOnly": True}]
    assert launcher["volumes"] == secret_vols
    assert launcher["containers"][0]["volumeMounts"] == secret_mounts
    assert worker["volumes"][1:] == [pvc.volume(), *secret_vols]
    assert worker["containers"][0]["volumeMounts"][1:] == [pvc.volume_mount(), *secret_mounts]
    # the variable naming the key file is on both and forwarded to the ranks
    cmd = launcher["containers"][0]["command"]
    assert cmd[cmd.index("GOOGLE_APPLICATION_CREDENTIALS") - 1] == "-x"
    for pod in (launcher, worker):
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/secrets/google/key.json"
    # without Secret volumes the Launcher has no volumes at all
    bare = mpijob.build(options(volumes=(pvc,)))["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert "volumes" not in bare["template"]["spec"]
    assert "volumeMounts" not in bare["template"]["spec"]["containers"][0]


def test_secret_volume_names_are_labels_apart_from_the_pvcs():
    long = volumes.SecretMount("s" * 200, "/a")
    assert re.fullmatch(r"secret-[0-9a-f]{12}", long.volume_name())
    assert volumes.SecretMount("gcp-sa", "/a").volume_name() == "secret-gcp-sa"
    # a Secret and a PVC of one name get two volumes
    assert volumes.SecretMount("ws", "/a").volume_name() != volumes.PvcMount(
        "ws", "/b").volume_name()


@pytest.mark.parametrize("secrets,pvcs,accepted", [
    ((volumes.SecretMount("GCP_SA", "/s"),), (), "DNS-1123 subdomains"),
    ((volumes.SecretMount("gcp-sa", "s"),), (), "absolute paths"),
    ((volumes.SecretMount("gcp-sa", "/s/../t"),), (), "normalised"),
    ((volumes.SecretMount("gcp-sa", "/etc/mpi"),), (), "clashes with '/etc/mpi'"),
    ((volumes.SecretMount("gcp-sa", "/dev"),), (), "clashes with '/dev/shm'"),
    ((volumes.SecretMount("gcp-sa", "/home/mpiuser/.ssh/x"),), (), "SSH key mount"),
    ((volumes.SecretMount("gcp-sa", "/s", optional="yes"),), (), "must be a bool"),
    ((volumes.SecretMount("a", "/s"), volumes.SecretMount("b", "/s")), (), "duplicate"),
    ((volumes.SecretMount("a", "/s"),), (volumes.PvcMount("b", "/s"),), "duplicate"),
    (({"secret_name": "a", "mount_path": "/s"},), (), "SecretMount("),
])
def test_bad_secret_volumes_are_refused(secrets, pvcs, accepted):
    with pytest.raises(ValueError) as e:
        mpijob.build(options(secret_volumes=secrets, volumes=pvcs))
    assert accepted in str(e.value)


def test_ssh_clash_follows_the_configured_mount_path():
    opts = options(volumes=(volumes.PvcMount("ws", "/home/mpiuser"),), ssh=ssh.ROOT_SSH)
    assert mpijob.build(opts)  # /root/.ssh now: /home/mpiuser is free
    with pytest.raises(ValueError, match="/root/.ssh"):
        mpijob.build(opts.replace(volumes=(volumes.PvcMount("ws", "/root"),)))


def _annotations(template: dict) -> dict:
    return template.get("metadata", {}).get("annotations", {})


def test_istio_sidecar_off_on_launcher_and_workers_by_default():
    """Kubeflow profile namespaces inject Istio; the Launcher must complete."""
    specs = mpijob.build(golden_options())["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        assert _annotations(specs[role]["template"])["sidecar.istio.io/inject"] == "false"
        # current Istio reads the label (istio.io "Controlling the injection policy")
        labels = specs[role]["template"]["metadata"]["labels"]
        assert labels["sidecar.istio.io/inject"] == "false"
    opted_in = mpijob.build(golden_options().replace(istio_sidecar=True))["spec"]
    for role in ("Launcher", "Worker"):
        assert "sidecar.istio.io/inject" not in _annotations(
            opted_in["mpiReplicaSpecs"][role]["template"])
        assert "sidecar.istio.io/inject" not in opted_in["mpiReplicaSpecs"][role][
            "template"]["metadata"].get("labels", {})


def test_multus_network_on_workers_only():
    """Only the Workers' NCCL traffic uses the RDMA network."""
    specs = mpijob.build(golden_options())["spec"]["mpiReplicaSpecs"]
    assert _annotations(specs["Worker"]["template"])[
        "k8s.v1.cni.cncf.io/networks"] == "ml/rdma-net@net1"
    assert "k8s.v1.cni.cncf.io/networks" not in _annotations(specs["Launcher"]["template"])


def test_kai_fraction_names_the_worker_container():
    """In our own pod templates the GPU container is "worker"."""
    job = mpijob.build(golden_options().replace(gpu="fraction:0.5"))
    ann = _annotations(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"])
    assert ann["gpu-fraction"] == "0.5" and ann["gpu-fraction-container-name"] == "worker"
    containers = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert containers[0]["name"] == "worker"


def test_pods_carry_no_api_token_and_chown_only_on_mismatch():
    """``automountServiceAccountToken`` false unless a service account is
    named; fsGroupChangePolicy OnRootMismatch with fsGroup."""
    specs = mpijob.build(golden_options().replace(service_account="", fs_group=1000))["spec"]
    for role in ("Launcher", "Worker"):
        pod = specs["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    named = mpijob.build(golden_options())["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert "automountServiceAccountToken" not in named["spec"]


def test_upstream_crd_alone_checks_fields_and_unknown_keys():
    """The upstream CRD (not the controller-rules schema) accepts the golden job and rejects
    a bad enum and, in strict mode, an unknown key; non-strict it accepts the unknown key,
    as the API server does (it prunes unknown fields instead of rejecting them)."""
    good = yaml.safe_load(GOLDEN.read_text())
    upstream_crds.validate(good)
    bad_enum = json.loads(json.dumps(good))
    bad_enum["spec"]["mpiImplementation"] = "MVAPICH"
    with pytest.raises(upstream_crds.CRDValidationError, match="mpiImplementation"):
        upstream_crds.validate(bad_enum)
    unknown = json.loads(json.dumps(good))
    unknown["spec"]["slotsPerWorkers"] = 1
    with pytest.raises(upstream_crds.CRDValidationError, match="slotsPerWorkers"):
        upstream_crds.validate(unknown)
    upstream_crds.validate(unknown, strict=False)


def test_scheduling_policy_reaches_run_policy_and_validates():
    """Gang scheduling (mpi-operator types.go SchedulingPolicy)."""
    opts = options(
        min_available=2, queue="gpu-queue", priority_class="high-priority",
        min_resources={"nvidia.com/gpu": "16", "cpu": "64"}, schedule_timeout_seconds=300,
        active_deadline_seconds=3600, backoff_limit=2)
    job = mpijob.build(opts)
    validate_mpijob(job)
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2, "queue": "gpu-queue", "priorityClass": "high-priority",
        "minResources": {"cpu": "64", "nvidia.com/gpu": "16"},
        "scheduleTimeoutSeconds": 300}
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 3600
    assert job["spec"]["runPolicy"]["backoffLimit"] == 2
    assert mpijob.build(options())["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2}  # the Workers, not the Launcher


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_gang_of_the_default_job_can_start_under_wait_for_workers_ready(workers):
    """kubeflow/mpi-operator issue 608: the PodGroup the operator derives from our
    MPIJob (kfp_gpu.mpi.spec.scheduling.implied_pod_group, a mirror of v0.8.2
    pkg/controller/podgroup.go) needs no more pods than exist before the Launcher."""
    job = mpijob.build(options(workers=workers))
    pg = scheduling.implied_pod_group(job)
    assert pg["minMember"] == workers == pg["creatable_before_launcher"]
    # What the operator would do without our default: Workers + 1, never reached.
    bare = copy.deepcopy(job)
    del bare["spec"]["runPolicy"]["schedulingPolicy"]
    pg = scheduling.implied_pod_group(bare)
    assert pg["minMember"] == workers + 1 > pg["creatable_before_launcher"]
    # AtStartup creates the Launcher at once: upstream's default gang fits, none added.
    at_startup = mpijob.build(options(workers=workers, launcher_creation_policy="AtStartup"))
    assert "schedulingPolicy" not in at_startup["spec"]["runPolicy"]
    pg = scheduling.implied_pod_group(at_startup)
    assert pg["minMember"] == workers + 1 == pg["creatable_before_launcher"]


def test_min_resources_count_of_the_implied_pod_group():
    """podgroup.go calPGMinResource: with minMember = Workers (< Launcher + Workers) and
    no minResources, the operator sums the Launcher and Workers - 1."""
    pg = scheduling.implied_pod_group(mpijob.build(options(workers=4)))
    assert pg["counted"] == {"Launcher": 1, "Worker": 3}
    pg = scheduling.implied_pod_group(mpijob.build(options(
        workers=4, min_resources={"nvidia.com/gpu": "32"})))
    assert pg["counted"] == {"Launcher": 1, "Worker": 4}  # minResources given: not derived
    bare = mpijob.build(options(workers=4, launcher_creation_policy="AtStartup"))
    bare["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 0}
    assert scheduling.implied_pod_group(bare)["counted"] == {}  # podgroup.go: nil when 0


def test_a_gang_larger_than_the_workers_is_refused_under_wait_for_workers_ready():
    with pytest.raises(ValueError, match=r"min_available 3 > workers 2.*accepted: 1\.\.2"):
        mpijob.build(options(workers=2, min_available=3))
    job = mpijob.build(options(workers=2, min_available=3, launcher_creation_policy="AtStartup"))
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3}


def test_workers_are_ready_only_when_sshd_listens():
    """WaitForWorkersReady counts Ready pods (mpi-operator
    countReadyWorkerPods); the Worker's readiness probe is a TCP connect to sshd's port."""
    job = mpijob.build(options())
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["readinessProbe"]["tcpSocket"] == {"port": ssh.SSH_PORT} == {"port": 2222}
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in launcher
    validate_mpijob(job)


def test_kueue_queue_label_suspend_and_a_launcher_that_waits_for_the_workers():
    """``kueue_queue`` -> the queue label, runPolicy.suspend (what Kueue's
    webhook defaults), and the Launcher waits for the Workers' sshd before mpirun."""
    job = mpijob.build(options(kueue_queue="team-a-gpu"))
    validate_mpijob(job)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-gpu"
    assert job["spec"]["runPolicy"]["suspend"] is True
    cmd = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "command"]
    assert cmd[:6] == ["/opt/venv/bin/python", "-m", "kfp_gpu.training.launcher_start",
                       "--port", "2222", "--"]
    assert cmd[6:] == mpijob.mpirun_line(options())  # then the usual mpirun line
    plain = mpijob.build(options())
    assert "suspend" not in plain["spec"]["runPolicy"]
    assert "kueue.x-k8s.io/queue-name" not in plain["metadata"]["labels"]
    with pytest.raises(ValueError, match="invalid kueue_queue 'Team_A'"):
        mpijob.build(options(kueue_queue="Team_A"))


@pytest.mark.parametrize("change,accepted", [
    ({"min_available": 0}, "min_available must be an integer >= 1"),
    ({"queue": "Bad_Queue"}, "DNS-1123 subdomains"),
    ({"priority_class": "x" * 300 + "!"}, "DNS-1123 subdomains"),
    ({"min_resources": {"nvidia.com/gpu": "many"}}, "resource names mapped to quantities"),
    ({"min_resources": ["nvidia.com/gpu=16"]},
     "min_resources must be a mapping of resource name to quantity, e.g."),
    ({"schedule_timeout_seconds": -5}, "schedule_timeout_seconds must be an integer >= 1"),
])
def test_bad_scheduling_policy_is_refused(change, accepted):
    with pytest.raises(ValueError, match=re.escape(accepted)):
        mpijob.build(options(**change))


@pytest.mark.parametrize("run_as_user, ipc_lock", [(1000, False), (0, True), (None, True)])
def test_ipc_lock_only_where_a_root_worker_can_use_it(run_as_user, ipc_lock):
    """With RDMA, IPC_LOCK goes to Workers that may run as root (uid 0, or unset: the
    image decides); Kubernetes sets no ambient capabilities, so a non-root rank never
    holds it, and Pod Security baseline would reject the pod for nothing."""
    for rdma in (True, False):
        job = mpijob.build(options(gpu="gpu:1", rdma=rdma, run_as_user=run_as_user,
                                   run_as_group=run_as_user))
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
        caps = worker["spec"]["containers"][0].get("securityContext", {}).get(
            "capabilities", {}).get("add", [])
        assert caps == (["IPC_LOCK"] if rdma and ipc_lock else [])
        assert worker["spec"].get("securityContext", {}).get("runAsUser") == run_as_user
        validate_pod_template(worker)


def test_the_launcher_always_waits_for_the_workers_sshd():
    """An MPIJob suspended by anyone (Kueue's default LocalQueue, not only
    our kueue_queue) gets its Launcher with the Workers (kubeflow/mpi-operator issue 615): the
    Launcher waits for every Worker's sshd before mpirun, so backoffLimit 0 survives a slow
    image pull. A TrainJob's launcher too: JobSet's dependsOn waits for the nodes' Ready,
    but not for the launcher's own hostfile name to resolve (a real node's CoreDNS
    published it after mpirun had failed on it, 2026-11-28)."""
    plain = mpijob.build(options())
    cmd = plain["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "command"]
    assert cmd[:6] == ["/opt/venv/bin/python", "-m", "kfp_gpu.training.launcher_start",
                       "--port", "2222", "--"]
    assert cmd[6:] == mpijob.mpirun_line(options())
    assert "backoffLimit" not in plain["spec"]["runPolicy"] or \
        plain["spec"]["runPolicy"]["backoffLimit"] == 0
    from kfp_gpu.mpi.spec import trainjob

    assert trainjob.launcher_command(options()) == cmd
    assert trainjob.launcher_command(options(kueue_queue="team-a"))[:6] == cmd[:6]
