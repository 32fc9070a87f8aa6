"""The whole cluster chain once, in containers: the ``train_resnet_horovod`` component runs in
the image its compiled YAML names, as a KFP pod runs it (executor input, in-cluster
service-account files, ``KUBERNETES_SERVICE_HOST``/``PORT``, Argo's emissary as PID 1:
tests/containers/kfp_pod.py), against the Kubernetes API double served over HTTPS on the
container network's gateway. The double hands the MPIJob the component creates to the
local MPIJob runner (tests/containers/runner_controller.py), whose Launcher and Workers are
containers of the horovod image; the runner's status goes back into the MPIJob.

Evidence: the conditions the component saw, the Launcher output it streamed, its metrics
output (2 ranks, identical weights), every API request authenticated with the service
account token; after a SIGTERM to the component's container, the DELETE it sent and the
job's containers and network gone; after KFP's Terminate as Argo delivers it (SIGTERM
through the emissary, the container dead one second later), the MPIJob gone by the
component's own DELETE; after a SIGKILL (no cleanup runs), the component pod's
deletion garbage-collecting the MPIJob through its ownerReference, and the containers gone.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from kfp import dsl

from kfp_gpu.components.prep_images.component import prep_images
from kfp_gpu.mpi.local import runner as local_runner
from testcluster import tls
from tests.containers import kfp_pod
from tests.containers.engine import LABEL
from tests.containers.runner_controller import RunnerController
from tests.doubles.k8s_api import FakeKube

pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "components" / "train_resnet_horovod" / "component.yaml"
NS = "team-a"
CLAIM = "resnet-work"
MOUNT = "/mnt/work"
UID = 1000


INPUTS = "/kfp/inputs"  # where the upstream task's outputs appear in the component pod


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, shared_data) -> Path:
    """prep_images' train/test Datasets (512 + 512 real Fashion-MNIST images) in a folder
    readable by uid 1000, to be mounted at :data:`INPUTS`."""
    folder = tmp_path_factory.mktemp("prep")
    prep_images.python_func(
        train_data=dsl.Dataset(name="train_data", uri=str(folder / "train_data")),
        test_data=dsl.Dataset(name="test_data", uri=str(folder / "test_data")),
        source=str(shared_data / "fashion-mnist"), max_rows_per_split=512)
    for p in (folder, *folder.rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return folder


class Chain:
    """Network, HTTPS double, PVC folder and service account of one chain run."""

    def __init__(self, client, tmp: Path, session: str):
        self.client, self.tmp = client, tmp
        self.token = f"sa-token-{uuid.uuid4().hex}"
        self.network = client.networks.create(f"kfp-gpu-chain-{uuid.uuid4().hex[:8]}",
                                              driver="bridge", labels={LABEL: session})
        self.network.reload()
        self.gateway = self.network.attrs["IPAM"]["Config"][0]["Gateway"]
        cert = tls.server_cert(tmp / "tls", ips=[self.gateway, "127.0.0.1"])
        self.kube = FakeKube().start(bind=self.gateway, tls=cert.tls, ca_file=str(cert.ca_file))
        self.work = tmp / "pvc"
        self.work.mkdir()
        os.chown(self.work, UID, UID)  # what fsGroup does to a real PVC
        self.controller = RunnerController(client, pvc_dirs={CLAIM: str(self.work)})
        self.kube.controller = self.controller
        self.sa = kfp_pod.service_account(tmp / "sa", self.token, cert.ca_file, NS)
        self.root = tmp / "root"
        self.root.mkdir(mode=0o777)
        os.chmod(self.root, 0o1777)

    def start(self, datasets: Path, **params):
        from docker.types import Mount

        task_root = self.root / "train-resnet-horovod"
        task_root.mkdir(mode=0o777)
        os.chmod(task_root, 0o1777)
        task_config = {  # what the KFP driver passes through (kfp.kubernetes.mount_pvc)
            "volumes": [{"name": CLAIM, "persistentVolumeClaim": {"claimName": CLAIM}}],
            "volumeMounts": [{"name": CLAIM, "mountPath": MOUNT}]}
        inputs = {name: dsl.Dataset(name=name, uri=f"{INPUTS}/{name}")
                  for name in ("train_data", "test_data")}
        args = {**inputs, "execution": "cluster", "workers": 2, "epochs": 1,
                "batch_size": 32, "learning_rate": 0.001, "lr_warmup_steps": 2,
                "optimizer": "adam", "model_name": "small", "blocks": 1, "width": 8,
                "seed": 7, "shm_size": "256Mi", "run_id": "run-chain", **params}
        self.task = kfp_pod.prepare(COMPONENT, args, task_root, task_config)
        mounts = [Mount(MOUNT, str(self.work), type="bind"),
                  Mount(INPUTS, str(datasets), type="bind", read_only=True)]
        # the pod identity the KFP backend puts on the executor container (fieldRefs,
        # kubeflow/pipelines backend/src/v2/compiler/argocompiler/common.go commonEnvs)
        self.pod = {"KFP_POD_NAME": f"chain-{uuid.uuid4().hex[:6]}-driver-main",
                    "KFP_POD_UID": str(uuid.uuid4())}
        # the pod exists in the API as in a cluster (the garbage collector deletes a job
        # whose owner it cannot find)
        self.kube.create_pod(NS, self.pod["KFP_POD_NAME"], {"app": "kfp"}, container="main",
                             uid=self.pod["KFP_POD_UID"])
        self.container = kfp_pod.start(
            self.client, self.task, sa_folder=self.sa, api_host=self.gateway,
            api_port=self.kube.port, network=self.network.name, mounts=mounts,
            environment=self.pod,
            labels={LABEL: getattr(self.client, "kfp_gpu_session", "manual")})
        return self.container

    def job_containers(self, name: str) -> list:
        return self.client.containers.list(
            all=True, filters={"label": f"{local_runner.JOB_LABEL}={NS}.{name}"})

    def close(self) -> None:
        for runner in self.controller.runners.values():
            runner.delete()
        self.kube.stop()
        self.network.remove()


@pytest.fixture()
def chain(docker_client, image, tmp_path):
    image("horovod"), image("trainer")  # skip (fail in CI) when not built
    os.chmod(tmp_path, 0o755)
    c = Chain(docker_client, tmp_path, getattr(docker_client, "kfp_gpu_session", "manual"))
    yield c
    c.close()


def _logs(container) -> str:
    return container.logs().decode("utf-8", "replace")


def test_component_in_its_image_runs_the_mpijob_to_success(chain, datasets):
    container = chain.start(datasets, steps_per_epoch=4)
    code = container.wait(timeout=600)["StatusCode"]
    out = _logs(container)
    assert code == 0, out[-4000:]
    name = json.loads(chain.task.output_uri("mpijob").read_text())["name"]
    # the MPIJob was created in the service account's namespace, through the double
    posts = [r for r in chain.kube.requests if r.method == "POST" and "/mpijobs" in r.path]
    assert [r.path for r in posts] == [f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs"]
    # (the kubernetes client writes the scheme as "bearer"; HTTP auth schemes are
    # case-insensitive, RFC 9110 11.1)
    # the MPIJob is owned by the component's pod: garbage collection removes it with the pod
    owners = posts[0].body["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [
        ("Pod", chain.pod["KFP_POD_NAME"], chain.pod["KFP_POD_UID"])]
    assert {r.authorization.lower() for r in chain.kube.requests} == {
        f"bearer {chain.token}"}
    # the runner moved its status: Created -> Running -> Succeeded, and the component saw it
    seen = []
    for status in chain.controller.statuses:
        for c in status.get("conditions", []):
            if c["status"] == "True" and c["type"] not in seen:
                seen.append(c["type"])
    assert seen == ["Created", "Running", "Succeeded"], chain.controller.errors
    # the Launcher's output (both ranks' last lines, rank 0's METRICS) reached the component's
    # log through the double's pod log stream, before it saw Succeeded
    lines = out.splitlines()
    done = [i for i, ln in enumerate(lines) if ln.startswith(("[rank 0/2] done", "[rank 1/2] done"))]
    metrics_line = [i for i, ln in enumerate(lines) if ln.startswith("METRICS {")]
    succeeded = [i for i, ln in enumerate(lines) if f"MPIJob {name}: Succeeded" in ln]
    assert len(done) == 2 and len(metrics_line) == 1 and len(succeeded) == 1, out[-4000:]
    assert max(done + metrics_line) < succeeded[0]
    metrics = json.loads((chain.work / name / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["weights_identical"] is True
    assert [r["host"] for r in metrics["ranks"]] == [f"{name}-worker-0", f"{name}-worker-1"]
    outputs = kfp_pod.executor_output(chain.task)
    scalars = outputs["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    assert scalars["world_size"] == 2 and scalars["weights_identical"] == 1
    assert (chain.task.output_uri("model") / "model.keras").stat().st_size > 10_000


def _running_with_output(kube, name: str) -> bool:
    job = kube.get_object("mpijobs", NS, name) or {}
    running = any(c["type"] == "Running" and c["status"] == "True"
                  for c in (job.get("status") or {}).get("conditions", []))
    return running and bool(kube.logs.get((NS, f"{name}-launcher")))


def _running_job(chain, container) -> str:
    """The name of the MPIJob the component started, once its Launcher runs and prints."""
    deadline = time.monotonic() + 300
    name = ""
    while not (name and _running_with_output(chain.kube, name)):
        container.reload()
        assert container.status == "running", _logs(container)[-4000:]
        assert time.monotonic() < deadline, "no running Launcher: " + _logs(container)[-4000:]
        name = next((k[2] for k in chain.kube.objects if k[0] == "mpijobs"), "")
        time.sleep(1)
    assert len(chain.job_containers(name)) == 3  # Launcher + 2 Workers
    return name


def test_sigterm_to_the_component_deletes_the_mpijob_and_its_containers(chain, datasets):
    container = chain.start(datasets, epochs=500, run_id="run-cancel")  # minutes of work
    name = _running_job(chain, container)
    container.kill(signal="SIGTERM")
    code = container.wait(timeout=120)["StatusCode"]
    out = _logs(container)
    assert code != 0, out[-4000:]
    assert "SIGTERM: the run was cancelled; deleting MPIJob" in out, out[-4000:]
    assert [d["name"] for d in chain.kube.deletes] == [name], out[-4000:]
    assert chain.controller.deleted.wait(60), "the runner's containers were not deleted"
    assert chain.job_containers(name) == []
    assert chain.client.networks.list(
        filters={"label": f"{local_runner.JOB_LABEL}={NS}.{name}"}) == []


def test_emissary_double_forwards_to_the_group_and_obeys_the_signal_file(tmp_path):
    """tests/containers/emissary.py as Argo's emissary (upstream lines in its docstring):
    a SIGTERM it gets goes to the command's process group (the child exits with its own
    code, which becomes the emissary's); a signal number written to
    ``/var/run/argo/ctr/main/signal`` is sent to the group within the 2 s poll (SIGKILL
    for a command that ignores SIGTERM: exit 128 + 9) and the file is removed. Runs on
    the host; no Docker needed."""
    import subprocess
    import sys

    env = {**os.environ, "EMISSARY_VAR_RUN_ARGO": str(tmp_path), "ARGO_CONTAINER_NAME": "main"}
    (tmp_path / "ctr" / "main").mkdir(parents=True)

    def start(body: str):
        p = subprocess.Popen([sys.executable, str(kfp_pod.EMISSARY), sys.executable, "-c",
                              "import signal, sys, time\n" + body + "\nprint('up', flush=True)"
                              "\ntime.sleep(60)"], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout.readline() == "up\n"
        return p

    p = start("signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))")
    p.send_signal(15)
    assert p.wait(timeout=10) == 7
    p = start("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    p.send_signal(15)  # ignored by the command; the emissary itself keeps running
    time.sleep(0.5)
    assert p.poll() is None
    t0 = time.monotonic()
    (tmp_path / "ctr" / "main" / "signal").write_text("9")
    assert p.wait(timeout=10) == 137
    assert time.monotonic() - t0 < 4  # one 2 s poll plus one 1 s reap, with room
    assert not (tmp_path / "ctr" / "main" / "signal").exists()


def test_terminate_sigterm_then_sigkill_one_second_later_deletes_the_mpijob(chain, datasets):
    """KFP's Terminate patches the Workflow (activeDeadlineSeconds 0), Argo
    execs ``argoexec kill 15 1`` in the container and the emissary forwards SIGTERM to the
    component's process group (tests/containers/emissary.py has the upstream lines); the
    emissary then exits within about a second, ending the container. Here the container is
    SIGKILLed one second after the SIGTERM, from outside (forced, as the kubelet's kill).
    The MPIJob must be gone from the API by the component's own DELETE (Foreground, not the
    garbage collector: the component's pod is still in the API), and the runner's
    containers with it. A cancel path that reads status or drains the log before its DELETE
    loses that second and leaves the job running (then nothing is in ``kube.deletes``)."""
    import docker

    container = chain.start(datasets, epochs=500, run_id="run-terminate")
    name = _running_job(chain, container)
    container.kill(signal="SIGTERM")
    time.sleep(1.0)
    try:
        container.kill(signal="SIGKILL")
    except docker.errors.APIError:  # it had already ended: the emissary's own exit
        pass
    container.wait(timeout=60)
    out = _logs(container)
    assert chain.kube.deletes == [{"name": name, "namespace": NS,
                                   "propagationPolicy": "Foreground"}], out[-4000:]
    assert chain.kube.get_object("pods", NS, chain.pod["KFP_POD_NAME"]) is not None
    assert chain.controller.deleted.wait(60), "the runner's containers were not deleted"
    deadline = time.monotonic() + 10
    while chain.kube.get_object("mpijobs", NS, name) is not None:
        assert time.monotonic() < deadline, "the MPIJob is still in the API"
        time.sleep(0.1)
    assert chain.job_containers(name) == []


def test_a_component_killed_without_cleanup_leaves_its_job_to_garbage_collection(
        chain, datasets):
    """SIGKILL (a lost node, a force-deleted pod): no cancel path runs and the MPIJob keeps
    its Workers. When the component's pod leaves the API, the garbage collector deletes the
    job through its ownerReference, and the operator removes the containers."""
    container = chain.start(datasets, epochs=500, run_id="run-lost")
    name = _running_job(chain, container)
    container.kill(signal="SIGKILL")
    container.wait(timeout=60)
    time.sleep(2)
    assert chain.kube.deletes == [] and len(chain.job_containers(name)) == 3
    chain.kube.delete_pod(NS, chain.pod["KFP_POD_NAME"])
    assert chain.controller.deleted.wait(60), "the job's containers were not deleted"
    assert chain.kube.deletes == [{"name": name, "namespace": NS,
                                   "propagationPolicy": "Background", "by": "garbage-collector"}]
    assert chain.job_containers(name) == []
    assert chain.kube.get_object("mpijobs", NS, name) is None
