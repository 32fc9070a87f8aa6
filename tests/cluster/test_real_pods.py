"""Real pods: the project's images run under the plane's real node (kubelet v1.36.3,
containerd v2.4.2, runc v1.5.3, CNI bridge, CoreDNS; :mod:`testcluster.node`), driven by the
real mpi-operator v0.8.2 and the real kube-scheduler / controllers.

What only a real node shows, and which upstream behaviour each test rests on:

- the MPIJob of train_resnet_horovod runs to Succeeded: mpi-operator's ssh Secret and
  hostfile ConfigMap mounted by the kubelet (pkg/controller/mpi_job_controller.go
  newLauncherPodTemplate / newWorker), the hostfile's
  ``<job>-worker-<i>.<job>.<ns>.svc`` names resolved by CoreDNS from the headless Service
  the operator makes, mpirun over ssh across pod IPs, Horovod's allreduce keeping the ranks'
  weights identical, the Launcher's log read through the real pods/log;
- PSA ``restricted`` (pod-security.kubernetes.io/enforce, k8s.io/pod-security-admission
  policy/check_*.go): the images start as non-root with every capability dropped;
- DRA: a claim from the project's ``dra`` claim template (class ``gpu.example.com``),
  allocated by the scheduler's DRA plugin and prepared by dra-example-driver's kubelet
  plugin, whose CDI spec puts ``GPU_DEVICE_<n>`` into the container
  (cmd/dra-example-kubeletplugin/cdi.go).

Each test pins its pods to the real node (its label and the taint it registers with,
:mod:`testcluster.node_config`); the kwok nodes never get them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import backends, network
from testcluster import node, node_config, node_images
from tests.cluster import jobs, kube
from tests.cluster.real_node import ON_REAL_NODE, UID, bind_pvcs, pod_placement, resnet_job

pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]

def run_resnet(api, namespace: str, job: dict, pvs: list, shared_data: Path,
               tmp_path: Path) -> tuple[dict, list[str], Path]:
    """:func:`bind_pvcs`, then launch ``job`` with the component's launcher and wait for its
    end; returns (rank 0's metrics, the launcher's log lines, the work folder)."""
    work = bind_pvcs(api, namespace, pvs, shared_data, tmp_path)
    launch = jobs.Launch(api, job, tmp_path / "record.json", pending_timeout_s=300,
                         log_poll_s=1.0)
    launch.start()
    result, error = launch.outcome(timeout=900)
    log = "\n".join(launch.lines)
    assert error is None, f"{error}\n--- launcher log:\n{log[-4000:]}"
    assert result is not None and result.status == "Succeeded", result
    m = json.loads((work / "run" / "metrics.json").read_text())
    # Horovod's ranks agree: rank 0's metrics (written through the PVC, uid 1000).
    ranks = m["ranks"]
    assert m["world_size"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["first_batch_sha256"] != ranks[1]["first_batch_sha256"]
    assert m["weights_identical"] is True and m["weights_sum_spread"] == 0.0
    assert all(r["steps_run"] == 6 for r in ranks) and m["test_rows"] == 10000
    assert (work / "run" / "model" / "model.keras").stat().st_uid == UID
    # The Launcher's log came through the real pods/log: the trainer's METRICS line.
    assert any(ln.startswith("METRICS {") for ln in launch.lines), log[-2000:]
    print(f"\n--- Launcher log of {namespace}/{job['metadata']['name']} (last lines):\n"
          + "\n".join(launch.lines[-12:]))
    return m, launch.lines, work


def test_trainjob_resnet_runs_on_real_pods(real_node, trainer_runtime, api, namespace,
                                           node_image, pvs, shared_data, tmp_path):
    """The same training through the TrainJob backend: Trainer v2.3.0 makes a JobSet
    (replicated jobs ``node`` and ``launcher``, runLauncherAsNode), JobSet v0.12.0 its Jobs,
    the real node runs the pods, and the TrainJob ends Complete. The launcher is node 0 and
    its own name is in the hostfile: launcher_start waits until the cluster DNS resolves it
    before mpirun (without the wait, CI's load once had mpirun fail ``ssh: Could not
    resolve hostname <job>-launcher-0-0.<job>``)."""
    name = f"resnet-tj-{uuid.uuid4().hex[:5]}"
    job = resnet_job(namespace, name, node_image("horovod"), backend=backends.TRAINJOB)
    assert job["spec"]["runtimeRef"]["name"] == trainer_runtime
    m, lines, _ = run_resnet(api, namespace, job, pvs, shared_data, tmp_path)
    assert any(ln.startswith("launcher_start: 1 Worker(s) answer on port 2222, this host's "
                             f"name {name}-launcher-0-0.{name} resolves,") for ln in lines), \
        "\n".join(lines[:20])
    assert len({r["host"] for r in m["ranks"]}) == 2  # one rank per node pod
    tj = kube.get_custom(api, "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name)
    assert kube.conditions(tj)["Complete"]["status"] == "True"
    pods = kube.pods(api, namespace, f"jobset.sigs.k8s.io/jobset-name={name}")
    assert pods and {p.spec.node_name for p in pods} == {node_config.NODE_NAME}


@pytest.mark.parametrize("name", ["horovod", "launcher", "trainer"])
def test_images_run_under_psa_restricted(real_node, api, node_image, name, request):
    """Each image as a pod in a namespace enforcing PSA ``restricted``: admitted (runAsNonRoot,
    every capability dropped, RuntimeDefault seccomp, no privilege escalation), started by
    runc, and inside it the process is non-root with an empty effective capability set."""
    from kubernetes import client

    ns = f"t-psa-{name}-{uuid.uuid4().hex[:5]}"
    kube.create_namespace(api, ns, {"pod-security.kubernetes.io/enforce": "restricted",
                                    "pod-security.kubernetes.io/enforce-version": "latest"})
    request.addfinalizer(lambda: kube.delete_namespace(api, ns))
    ref = node_image(name)
    pod = {
        "metadata": {"name": "probe"},
        "spec": {
            "restartPolicy": "Never", **pod_placement(),
            "securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "probe", "image": ref, "imagePullPolicy": "Never",
                "command": ["sh", "-c", PROBE],
                "securityContext": {"allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}}}]}}
    client.CoreV1Api(api).create_namespaced_pod(ns, pod)
    phase = kube.wait_for(lambda: _ended(api, ns, "probe"), 180, f"pod {ns}/probe to end")
    out = client.CoreV1Api(api).read_namespaced_pod_log("probe", ns)
    assert phase == "Succeeded", out
    lines = out.split()
    uid = int(lines[0])
    assert uid != 0, out
    caps = dict(ln.split(":") for ln in out.splitlines() if ln.startswith("Cap"))
    assert caps["CapEff"].strip() == "0000000000000000", out
    assert caps["CapPrm"].strip() == "0000000000000000", out
    assert "Seccomp:\t2" in out, out  # SECCOMP_MODE_FILTER: RuntimeDefault applied by runc


#: What the PSA probe prints: uid, gid, capability sets and seccomp mode of its own process.
PROBE = "id -u; id -g; grep -E '^(Cap(Eff|Prm|Bnd)|Seccomp):' /proc/self/status"


def _ended(api, ns: str, pod: str) -> str | None:
    from kubernetes import client

    p = client.CoreV1Api(api).read_namespaced_pod(pod, ns)
    return p.status.phase if p.status.phase in ("Succeeded", "Failed") else None



#: The DRA request of the real-node test: one fake GPU of dra-example-driver per Worker
#: (the project's ``dra`` kind with ``class=``; NVIDIA's DeviceClasses are not served here).
DRA_GPU = f"dra:gpu=1,class={node.DRA_DEVICE_CLASS}"
#: What each rank runs: a line, then a pause while the test reads each Worker container's
#: environment through the real pods/exec (mpirun's ssh sessions start a fresh
#: environment, so the ranks themselves do not see the CDI variables).
DRA_PROGRAM = ("sh", "-c", "echo RANK_UP $(hostname); sleep 20")


def test_a_dra_worker_gets_its_device_from_the_kubelet_plugin(real_node, api, namespace,
                                                              node_image, tmp_path):
    """Two Workers each claim one ``gpu.example.com`` device through the claim template the
    launcher makes: the scheduler allocates distinct devices from the plugin's
    ResourceSlice, the kubelet plugin prepares them, and each container sees exactly the
    device its claim was allocated (the CDI spec's ``GPU_DEVICE_<n>=gpu-<n>``)."""
    from kfp_gpu.mpi.spec import mpijob
    from kfp_gpu.mpi.spec.options import MPIJobOptions

    name = f"dra-{uuid.uuid4().hex[:5]}"
    job = mpijob.build(MPIJobOptions.from_settings(
        name=name, namespace=namespace, image=node_image("horovod"), program=DRA_PROGRAM,
        workers=2, gpu=DRA_GPU, shm_size="64Mi", worker_cpu="100m", worker_memory="256Mi",
        tolerations=ON_REAL_NODE["tolerations"], node_selector=ON_REAL_NODE["node_selector"]))
    launcher_spec = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher_spec.update(pod_placement())
    seen: dict[str, list[str]] = {}

    def allocations() -> dict[str, list[str]] | None:
        r = real_node.kubectl("get", "resourceclaims", "-n", namespace, "-o", "json")
        for c in json.loads(r.stdout)["items"]:
            alloc = (c.get("status") or {}).get("allocation")
            if alloc:
                seen[c["metadata"]["name"]] = [d["device"] for d in alloc["devices"]["results"]]
        return dict(seen) if len(seen) == 2 else None

    launch = jobs.Launch(api, job, tmp_path / "record.json", pending_timeout_s=180,
                         log_poll_s=0.5)
    launch.start()
    kube.wait_for(allocations, 180, "both Worker claims allocated")
    kube.wait_for(lambda: sum(ln.startswith("RANK_UP ") for ln in launch.lines) == 2, 180,
                  "both ranks up")
    devices = {}
    for i in range(2):
        r = real_node.kubectl("exec", "-n", namespace, f"{name}-worker-{i}", "--", "sh", "-c",
                              "env | grep '^GPU_DEVICE_[0-9]*=' | sort")
        devices[f"{name}-worker-{i}"] = r.stdout.split()
    _, error = launch.outcome(timeout=300)
    log = "\n".join(launch.lines)
    assert error is None, f"{error}\n{log[-3000:]}"
    allocated = sorted(d for ds in seen.values() for d in ds)
    assert len(allocated) == 2 and len(set(allocated)) == 2, seen  # distinct devices
    # each Worker's container holds exactly one GPU_DEVICE_<n>=gpu-<n>: the one allocated
    assert all(len(v) == 1 for v in devices.values()), devices
    got = sorted(v[0].split("=", 1)[1] for v in devices.values())
    assert got == allocated, (devices, seen)


def test_the_launcher_as_a_real_pod_owns_its_job_and_gc_cleans_up(real_node, api, namespace,
                                                                  node_image):
    """The launcher component as KFP runs it: a pod of the launcher image under the
    ``pipeline-runner`` ServiceAccount bound to manifests/rbac's Role, in-cluster config (the
    kubelet's projected token and ``KUBERNETES_SERVICE_HOST``, the ``kubernetes`` Service's
    ClusterIP reached through kube-proxy), ``KFP_POD_NAME``/``KFP_POD_UID`` from the downward
    API as KFP's argocompiler sets them (backend/src/v2/compiler/argocompiler/common.go).
    It creates the MPIJob (its pods on the kwok GPU nodes) owned by its own pod; deleting
    that pod at once (grace 0: the launcher gets no chance to cancel) leaves the rest to
    the real garbage collector, which removes the MPIJob and every pod of it."""
    from kubernetes import client

    from tests.cluster.access import install_rbac

    core = client.CoreV1Api(api)
    install_rbac(real_node, namespace)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "pipeline-runner"}})
    name = f"owned-{uuid.uuid4().hex[:5]}"
    job = jobs.component_job(namespace, name)  # 2 Workers x 1 GPU: kwok's DGX node
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "job"},
                                                  "data": {"job.yaml": yaml.safe_dump(job)}})
    field = lambda p: {"valueFrom": {"fieldRef": {"fieldPath": p}}}
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "component"},
        "spec": {
            "serviceAccountName": "pipeline-runner", "restartPolicy": "Never",
            **pod_placement(),
            "volumes": [{"name": "job", "configMap": {"name": "job"}}],
            "containers": [{
                "name": "main", "image": node_image("launcher"), "imagePullPolicy": "Never",
                "command": ["python", "-m", "kfp_gpu.mpi.launch.launcher", "--job",
                            "/job/job.yaml", "--record", "/tmp/record.json",
                            "--watch-timeout", "10"],
                "env": [{"name": "KFP_POD_NAME", **field("metadata.name")},
                        {"name": "KFP_POD_UID", **field("metadata.uid")}],
                "volumeMounts": [{"name": "job", "mountPath": "/job"}]}]}})
    uid = core.read_namespaced_pod("component", namespace).metadata.uid

    def owned_job():
        mj = jobs.mpijob(api, namespace, name)
        refs = ((mj or {}).get("metadata") or {}).get("ownerReferences") or []
        return mj if any(r["uid"] == uid and r["kind"] == "Pod" for r in refs) else None

    def logs() -> str:
        return _log(api, namespace, "component") or "(no log)"

    kube.wait_for(owned_job, 180, f"MPIJob {name} owned by the component pod ({logs()})")
    kube.wait_for(lambda: len(jobs.worker_pods(api, namespace, name)) == 2, 60, "2 Workers")
    assert core.read_namespaced_pod("component", namespace).status.phase == "Running", logs()
    core.delete_namespaced_pod("component", namespace, grace_period_seconds=0)
    kube.wait_for(lambda: jobs.mpijob(api, namespace, name) is None, 120,
                  "the garbage collector to delete the MPIJob")
    kube.wait_for(lambda: not kube.pods(api, namespace,
                                        f"training.kubeflow.org/job-name={name}"), 120,
                  "the MPIJob's pods to go")


def sleeper_job(ns: str, name: str, image: str, seconds: int = 600) -> dict:
    """An MPIJob of the horovod image whose 2 ranks sleep, Launcher and Workers pinned to
    the real node (the builder's own placement options)."""
    from kfp_gpu.mpi.spec import mpijob
    from kfp_gpu.mpi.spec.options import MPIJobOptions

    job = mpijob.build(MPIJobOptions.from_settings(
        name=name, namespace=ns, image=image,
        program=("sh", "-c", f"echo RANK_UP $(hostname); exec sleep {seconds}"),
        workers=2, gpu="none", shm_size="64Mi", worker_cpu="100m", worker_memory="256Mi",
        tolerations=ON_REAL_NODE["tolerations"], node_selector=ON_REAL_NODE["node_selector"]))
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(pod_placement())
    return job


def test_sigterm_to_the_component_ends_every_real_pod_within_its_grace(real_node, api,
                                                                         namespace, node_image,
                                                                         tmp_path):
    """SIGTERM to the launcher mid-run (as the kubelet sends it when KFP deletes the
    component's pod): its cancel path deletes the MPIJob (Foreground), the real Launcher
    and Worker pods get SIGTERM from their kubelet and end within their grace period
    (30 s, the pod default), and containerd holds no container of them afterwards."""
    import signal
    import time

    name = f"term-{uuid.uuid4().hex[:5]}"
    proc = jobs.launcher_process(real_node, sleeper_job(namespace, name, node_image("horovod")),
                                 tmp_path)
    try:
        kube.wait_for(lambda: len([p for p in kube.pods(
            api, namespace, f"training.kubeflow.org/job-name={name}")
            if p.status.phase == "Running"]) == 3, 180, "Launcher and 2 Workers Running")
        # the ranks run (mpirun reached both Workers over ssh)
        launcher = jobs.launcher_pod(api, namespace, name)
        kube.wait_for(lambda: _log(api, namespace, launcher.metadata.name).count("RANK_UP") == 2,
                      120, "both ranks up")
        assert node_images.containers_of(real_node, namespace)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        ended = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out + err
    assert "cancel" in (out + err).lower(), (out + err)[-2000:]
    kube.wait_for(lambda: not kube.pods(api, namespace, f"training.kubeflow.org/job-name={name}"),
                  60, "the job's pods to go")
    gone = time.monotonic() - t0
    assert gone < 30 + 15, f"pods took {gone:.0f} s to end after SIGTERM (grace 30 s)"
    # no process of them is left; the kubelet's container GC (every minute,
    # pkg/kubelet/kubelet.go ContainerGCPeriod) then removes the dead containers
    assert node_images.running_tasks(real_node, node_images.containers_of(real_node, namespace)) == []
    kube.wait_for(lambda: not node_images.containers_of(real_node, namespace), 150,
                  "the kubelet to remove the pods' containers")
    assert jobs.mpijob(api, namespace, name) is None
    print(f"\nlauncher ended {ended:.1f} s after SIGTERM; pods gone after {gone:.1f} s")


def _log(api, ns: str, pod: str) -> str:
    from kubernetes import client

    try:
        return client.CoreV1Api(api).read_namespaced_pod_log(pod, ns)
    except client.exceptions.ApiException:
        return ""


#: Kills every ``train-resnet`` process of the container it runs in (no procps in the image;
#: the bracket keeps the pattern from matching this shell's own command line).
KILL_RANKS = ("for p in /proc/[0-9]*; do grep -qs 'train-[r]esnet' $p/cmdline && "
              "kill -9 ${p#/proc/}; done; true")


def test_a_killed_worker_fails_the_job_and_a_rerun_resumes_from_the_checkpoint(
        real_node, api, namespace, node_image, pvs, shared_data, tmp_path):
    """A Worker's rank killed mid-run (SIGKILL inside the real container): mpirun aborts,
    the Launcher's container exits non-zero, the Job controller fails the Launcher Job
    (backoffLimit 0), mpi-operator marks the MPIJob Failed, and the launcher raises
    MPIJobFailed whose one-line message carries the reason. A second run of the same
    component over the same work folder resumes from the last checkpoint the first run
    wrote (tf.train.CheckpointManager, kfp_gpu/training/horovod_train.py)."""
    from kfp_gpu.mpi.launch.records import MPIJobFailed

    image = node_image("horovod")
    work = bind_pvcs(api, namespace, pvs, shared_data, tmp_path)
    ckpt = work / "run" / "checkpoints"
    name = f"kill-{uuid.uuid4().hex[:5]}"
    first = jobs.Launch(api, resnet_job(namespace, name, image, epochs=3, steps=60,
                                        checkpoint_dir="/work/run/checkpoints"),
                        tmp_path / "record-1.json", pending_timeout_s=300, log_poll_s=1.0)
    first.start()
    kube.wait_for(lambda: (ckpt / "checkpoint").exists(), 600,
                  f"the first checkpoint ({chr(10).join(first.lines[-10:])})", interval=1)
    real_node.kubectl("exec", "-n", namespace, f"{name}-worker-1", "--", "sh", "-c",
                      KILL_RANKS)
    _, error = first.outcome(timeout=600)
    assert isinstance(error, MPIJobFailed), error
    message = str(error).splitlines()[0]
    assert "Failed" in message or "failed" in message, message
    mj = jobs.mpijob(api, namespace, name)
    assert kube.conditions(mj)["Failed"]["status"] == "True"
    assert not (work / "run" / "metrics.json").exists()
    saved = sorted(p.name for p in ckpt.glob("ckpt-*.index"))
    assert saved, list(ckpt.iterdir())

    again = f"{name}-again"
    second = jobs.Launch(api, resnet_job(namespace, again, image, epochs=3, steps=60,
                                         checkpoint_dir="/work/run/checkpoints"),
                         tmp_path / "record-2.json", pending_timeout_s=300, log_poll_s=1.0)
    second.start()
    _, error = second.outcome(timeout=900)
    assert error is None, f"{error}\n" + "\n".join(second.lines[-30:])
    m = json.loads((work / "run" / "metrics.json").read_text())
    assert m["resumed_from"], m
    assert m["start_epoch"] >= 1, m
    assert m["weights_identical"] is True
    print(f"\nfirst run: {message}\nsecond run resumed from {m['resumed_from']} at epoch "
          f"{m['start_epoch']}")


#: What one run of :func:`resnet_job` determines, read from rank 0's metrics: equal between
#: two runs of the same job, whatever runs it.
DETERMINED = ("world_size", "global_step", "epochs_run", "start_epoch", "global_batch_size",
              "final_loss", "final_accuracy", "test_loss", "test_accuracy", "test_rows",
              "weights_identical", "weights_sum_spread", "parameters")


def test_the_local_runner_and_real_pods_agree_on_the_resnet_job(
        real_node, api, namespace, node_image, pvs, shared_data, tmp_path, docker_client):
    """The component's MPIJob on real pods through mpi-operator (2 Workers, sshd with the
    operator's Secret, the hostfile's names through CoreDNS, mpirun across pods, Horovod's
    allreduce with ranks in sync, metrics through pods/log, a checkpoint through the PVC),
    and the same MPIJob (one builder, one seed, the same data) run by the local Docker
    runner (kfp_gpu/mpi/local): both end Succeeded with the same Worker host names (Docker's
    aliases, CoreDNS), the same determined metrics and the same final weights per rank (the
    Launcher log's ``weights`` checksums, read through ``docker logs`` and through
    pods/log), and both leave only the Launcher once the job ends (cleanPodPolicy Running,
    mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go`` deleteWorkerPods; the
    kubelet ends the Workers with their grace period, so the test waits for that)."""
    import copy
    import re

    from tests.containers import local_jobs

    image = node_image("horovod")
    name = f"cmp-{uuid.uuid4().hex[:5]}"
    job = resnet_job(namespace, name, image, checkpoint_dir="/work/run/checkpoints")
    real, real_lines, work = run_resnet(api, namespace, job, pvs, shared_data, tmp_path)
    # rank 0 wrote its checkpoint through the PVC (tf.train.CheckpointManager's index file)
    assert (work / "run" / "checkpoints" / "checkpoint").stat().st_uid == UID

    def job_pods():
        pods = kube.pods(api, namespace, f"training.kubeflow.org/job-name={name}")
        return pods if len(pods) == 1 else None

    real_pods = kube.wait_for(job_pods, 90, "the Workers to be deleted")
    assert [(p.spec.node_name, p.status.phase) for p in real_pods] == [
        (node_config.NODE_NAME, "Succeeded")]

    local_dir = tmp_path / "local"
    local_dir.mkdir()
    pvc_dirs = local_jobs.resnet_pvc_dirs(shared_data, local_dir)
    fs_group = (job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"].get(
        "securityContext") or {}).get("fsGroup")
    ssh_files = {n: (0o644, 0, 0 if fs_group is None else fs_group)
                 for n in ("id_rsa", "id_rsa.pub", "authorized_keys")}
    status, _, runner = local_jobs.run_job(docker_client, copy.deepcopy(job), ssh_files,
                                           pvc_dirs=pvc_dirs)
    try:
        local_log = runner.logs("launcher")
        left = sorted(c.name for c in runner.containers())
    finally:
        runner.delete()
    local = json.loads((Path(pvc_dirs["work"]) / "run" / "metrics.json").read_text())

    assert [c["type"] for c in status["conditions"] if c["status"] == "True"][-1] == \
        "Succeeded"
    assert {r["host"] for r in local["ranks"]} == {r["host"] for r in real["ranks"]} == {
        f"{name}-worker-0", f"{name}-worker-1"}
    assert {k: local[k] for k in DETERMINED} == {k: real[k] for k in DETERMINED}
    assert [r["trainable_checksum"] for r in local["ranks"]] == [
        r["trainable_checksum"] for r in real["ranks"]]
    done = re.compile(r"^\[rank (\d)/2\] done: 6 steps, .* weights (\w+)$")
    weights = lambda lines: sorted(m.groups() for m in map(done.match, lines) if m)
    assert weights(local_log.splitlines()) == weights(real_lines) != []
    assert [p.metadata.labels["training.kubeflow.org/job-role"] for p in real_pods] == [
        "launcher"]
    assert all("launcher" in n for n in left), left


#: What each rank of the Secret-volume test runs: its host, the sha256 of the file the
#: forwarded GOOGLE_APPLICATION_CREDENTIALS names, the forwarded (set) optional S3 key,
#: then a pause while the test reads the same file in the Launcher through pods/exec.
KEY_PROGRAM = ("sh", "-c", ('echo "KEYFILE $(hostname) $(sha256sum '
                            '"$GOOGLE_APPLICATION_CREDENTIALS" | cut -d" " -f1) '
                            'ENDPOINT=$AWS_ENDPOINT_URL"; sleep 20'))


def test_a_secret_volume_reaches_every_rank_and_absent_optional_keys_stay_quiet(
        real_node, api, namespace, node_image, tmp_path):
    """The component's MPIJob for a task compiled with the GCS recipe of docs/cluster.md
    (``--secret-volume gcp-sa:/var/secrets/google:key.json``) and the S3 preset
    (``--secret-env s3-creds``), built from the TaskConfig the KFP 2.17 driver hands it
    (tests/support/kfp_driver.py), on the real node: the kubelet mounts the Secret in
    the Launcher and both Workers; each rank, started over ssh by mpirun, reads the file
    the forwarded ``GOOGLE_APPLICATION_CREDENTIALS`` names (its sha256 is the Secret's);
    the Launcher holds the same file at the same path (read through pods/exec). The Secret
    lacks four of the preset's optional keys: the Launcher's log names none of them (mpirun
    gets ``-x`` only for set variables, kfp_gpu/mpi/spec/mpirun.py forward_set_only), while
    the one it has reaches the ranks."""
    import base64
    import hashlib
    import re

    from kubernetes import client

    from kfp_gpu.dsl import task_settings
    from kfp_gpu.mpi.spec import mpijob
    from tests.support.kfp_driver import compiled_task, driver_task_config

    key = json.dumps({"type": "service_account", "client_email": f"ranks@{namespace}.test",
                      "private_key_id": uuid.uuid4().hex}).encode()
    want = hashlib.sha256(key).hexdigest()
    endpoint = "http://store.invalid:9000"
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "gcp-sa"}, "data": {
        "key.json": base64.b64encode(key).decode()}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s3-creds"}, "stringData": {
        "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": endpoint}})
    compiled = task_settings.from_options(secret_env=["s3-creds"],
                                          secret_volume=["gcp-sa:/var/secrets/google:key.json"])
    settings = {**rt.worker_settings(driver_task_config(*compiled_task(compiled))),
                **ON_REAL_NODE, "worker_cpu": "100m", "worker_memory": "256Mi"}
    name = f"key-{uuid.uuid4().hex[:5]}"
    opts = rt.job_options(
        name=name, namespace=namespace, image=node_image("horovod"), args=(), workers=2,
        settings=settings, rdma=False, rdma_resource=network.RDMA_SHARED_DEVICE_A,
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="64Mi", run_id="real", task_name="train-resnet-horovod", gpu_override="none",
        policy=rt.policy_settings())
    job = mpijob.build(opts.replace(program=KEY_PROGRAM))
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(pod_placement())

    launch = jobs.Launch(api, job, tmp_path / "record.json", pending_timeout_s=300,
                         log_poll_s=0.5)
    launch.start()
    kube.wait_for(lambda: sum("KEYFILE " in ln for ln in launch.lines) == 2, 300,
                  "both ranks to read the key file", interval=1)
    pod = jobs.launcher_pod(api, namespace, name).metadata.name
    in_launcher = real_node.kubectl("exec", "-n", namespace, pod, "--", "sh", "-c",
                                    'sha256sum "$GOOGLE_APPLICATION_CREDENTIALS"').stdout
    result, error = launch.outcome(timeout=300)
    log = "\n".join(launch.lines)
    assert error is None and result.status == "Succeeded", f"{error}\n{log[-3000:]}"
    ranks = [m.groups() for m in map(re.compile(r"KEYFILE (\S+) (\S*) ENDPOINT=(\S*)").search,
                                     launch.lines) if m]
    assert sorted(host for host, _, _ in ranks) == [f"{name}-worker-0", f"{name}-worker-1"]
    assert {(digest, url) for _, digest, url in ranks} == {(want, endpoint)}, log[-3000:]
    assert in_launcher.split() == [want, "/var/secrets/google/key.json"]
    absent = [n for n in task_settings.AWS_OPTIONAL if n != "AWS_ENDPOINT_URL"]
    assert not [n for n in absent if n in log], log[:3000]
    print(f"\n--- Launcher log of {namespace}/{name}:\n" + log[-2000:])
