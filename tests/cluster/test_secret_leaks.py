"""A Secret's value never leaves its Secret during a run (marker ``chaos``: ``make chaos`` on
a ``make cluster-up NODE=1`` plane; docs/reliability.md, scenario 7).

The task of train_resnet_horovod compiled with ``kfp-gpu compile --secret-env s3-creds``
(the S3 preset: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``... as ``secretKeyRef``
env of the task, kfp_gpu/dsl/task_settings.py), its TaskConfig as the KFP 2.17 driver
hands it (tests/support/kfp_driver.py), becomes the component's MPIJob: the same ``secretKeyRef``
env on the Launcher and every Worker (components/train_resnet_horovod/mounts.py,
kfp_gpu/mpi/spec/mpijob.py), forwarded by name to the ranks with ``mpirun -x``
(kfp_gpu/mpi/spec/mpirun.py). The Secret holds fresh random values; the component's
launcher runs with them in its environment, as the task's pod has them (the kubelet
resolves ``secretKeyRef`` into the container's environment: k8s.io/kubernetes
pkg/kubelet/kubelet_pods.go ``makeEnvironmentVariables``).

Each rank prints the sha256 of each value (so the values did reach the ranks), and then
every place a run writes is read and searched for the values, raw and base64-encoded:

- every container log of every pod of the namespace, current and previous, read twice
  (while the ranks run, and after the job ended: the Workers are deleted at the end,
  cleanPodPolicy Running) through the API (pods/log), and the kubelet's own log files of
  the namespace on the node (``podLogsDir``, testcluster/node_config.py);
- the component launcher's stdout and stderr and the record it writes;
- ``kubectl get -o json`` of every namespaced kind the API server lists, in the namespace
  (events, the MPIJob and its spec, pods, Jobs, ConfigMaps, the operator's ssh Secret...),
  except the Secret itself.

The search is shown to work: it finds the base64 value in the Secret it leaves out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import uuid

import pytest

from components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import mpijob, network
from testcluster import node_config
from tests.cluster import jobs, kube
from tests.cluster.chaos import Reader
from tests.cluster.real_node import ON_REAL_NODE, pod_placement

pytestmark = [pytest.mark.node, pytest.mark.chaos, pytest.mark.timeout(900)]

SECRET = "s3-creds"
#: Each rank: its host and the sha256 of the two values it got, then a pause while the
#: test reads every log of the namespace.
PROGRAM = ("sh", "-c", ('echo "KEYSHA $(hostname) '
           '$(printf %s "$AWS_ACCESS_KEY_ID" | sha256sum | cut -d" " -f1) '
           '$(printf %s "$AWS_SECRET_ACCESS_KEY" | sha256sum | cut -d" " -f1)"; sleep 20'))


def forms(value: str) -> dict[str, str]:
    """The ways a value can be written down in what is scanned: as is, and base64 (a
    Secret's ``data``, a ConfigMap's ``binaryData``). Pure."""
    return {"raw": value, "base64": base64.b64encode(value.encode()).decode()}


def found_in(text: str, values: dict[str, str]) -> list[str]:
    """``"<value name>/<form>"`` for each form of each value in ``text``. Pure."""
    return [f"{name}/{form}" for name, value in values.items()
            for form, written in forms(value).items() if written in text]


def container_logs(api, ns: str) -> dict[str, str]:
    """``{"pod/container[ previous]": log}`` of every container (init and ephemeral ones
    too) of every pod of ``ns``, the previous instance's where there is one."""
    from kubernetes.client.exceptions import ApiException

    core, out = kube.core(api), {}
    for pod in core.list_namespaced_pod(ns).items:
        spec = pod.spec
        names = [c.name for c in [*(spec.init_containers or []), *spec.containers,
                                  *(spec.ephemeral_containers or [])]]
        for c in names:
            for previous in (False, True):
                try:
                    out[f"{pod.metadata.name}/{c}{' previous' if previous else ''}"] = \
                        core.read_namespaced_pod_log(pod.metadata.name, ns, container=c,
                                                     previous=previous)
                except ApiException as e:  # no previous instance, not started: 400
                    if e.status not in (400, 404):
                        raise
    return out


def node_log_files(plane, ns: str) -> dict[str, str]:
    """The kubelet's log files of ``ns``'s containers on the real node
    (``<podLogsDir>/<ns>_<pod>_<uid>/<container>/<n>.log``)."""
    root = node_config.Paths(plane.dir / "node").pod_logs
    return {str(f.relative_to(root)): f.read_text(errors="replace")
            for f in sorted(root.glob(f"{ns}_*/*/*.log"))}


def namespaced_objects(plane, ns: str) -> list[dict]:
    """Every object of ``ns`` of every namespaced kind the API server lists."""
    kinds = plane.kubectl("api-resources", "--namespaced=true", "--verbs=list",
                          "-o", "name").stdout.split()
    out = plane.kubectl("get", ",".join(kinds), "-n", ns, "-o", "json",
                        "--ignore-not-found", timeout=180)
    return json.loads(out.stdout or '{"items": []}').get("items") or []


def test_a_secret_value_is_in_no_log_and_no_object_of_the_run(real_node, api, namespace,
                                                             horovod, tmp_path,
                                                             monkeypatch):
    from kubernetes import client

    from kfp_gpu.dsl import task_settings
    from tests.support.kfp_driver import compiled_task, driver_task_config

    values = {"AWS_ACCESS_KEY_ID": f"KFPGPU{secrets.token_hex(8).upper()}",
              "AWS_SECRET_ACCESS_KEY": f"leak-{secrets.token_urlsafe(30)}"}
    client.CoreV1Api(api).create_namespaced_secret(namespace, {
        "metadata": {"name": SECRET}, "stringData": values})
    compiled = task_settings.from_options(secret_env=[SECRET])
    settings = {**rt.worker_settings(driver_task_config(*compiled_task(compiled))),
                **ON_REAL_NODE, "worker_cpu": "100m", "worker_memory": "256Mi"}
    name = f"leak-{uuid.uuid4().hex[:5]}"
    opts = rt.job_options(
        name=name, namespace=namespace, image=horovod, args=(), workers=2,
        settings=settings, rdma=False, rdma_resource=network.RDMA_SHARED_DEVICE_A,
        multus_networks="", nccl_ib_hca="", nccl_net_gdr_level="", nccl_socket_ifname="",
        shm_size="64Mi", run_id="real", task_name="train-resnet-horovod", gpu_override="none",
        policy=rt.policy_settings())
    job = mpijob.build(opts.replace(program=PROGRAM))
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(pod_placement())
    for env_name, value in values.items():  # the task's pod has them in its environment
        monkeypatch.setenv(env_name, value)
    proc = jobs.launcher_process(real_node, job, tmp_path, "--pending-timeout", "300")
    out, err = Reader(proc.stdout), Reader(proc.stderr)
    out.start()
    err.start()
    try:
        kube.wait_for(lambda: sum("KEYSHA " in ln for ln in out.lines) == 2, 300,
                      "both ranks to print the sha256 of the values", interval=1)
        while_running = container_logs(api, namespace)
        files_running = node_log_files(real_node, namespace)
        objects_running = namespaced_objects(real_node, namespace)
        rc = proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(10)
    err.join(10)
    stdout, stderr = "\n".join(out.lines), "\n".join(err.lines)
    assert rc == 0, stderr[-4000:]
    want = {hashlib.sha256(v.encode()).hexdigest() for v in values.values()}
    ranks = [m.groups() for m in map(re.compile(r"KEYSHA (\S+) (\S+) (\S+)").search,
                                     out.lines) if m]
    assert sorted(h for h, _, _ in ranks) == [f"{name}-worker-0", f"{name}-worker-1"], stdout
    assert all({a, b} == want for _, a, b in ranks), stdout[-3000:]  # the ranks got them

    texts = {f"log {k} (running)": v for k, v in while_running.items()}
    texts.update({f"log {k} (ended)": v for k, v in container_logs(api, namespace).items()})
    texts.update({f"node file {k} (running)": v for k, v in files_running.items()})
    texts.update({f"node file {k} (ended)": v
                  for k, v in node_log_files(real_node, namespace).items()})
    texts.update({"launcher stdout": stdout, "launcher stderr": stderr,
                  "launcher record": (tmp_path / "record.json").read_text()})
    the_secret = None
    for when, objects in (("running", objects_running),
                          ("ended", namespaced_objects(real_node, namespace))):
        for obj in objects:
            meta = obj.get("metadata") or {}
            if obj.get("kind") == "Secret" and meta.get("name") == SECRET:
                the_secret = json.dumps(obj)
                continue
            texts[f"object {obj.get('kind')}/{meta.get('name')} ({when})"] = json.dumps(obj)
    assert the_secret is not None
    # the search finds what is there: the base64 values in the Secret it leaves out
    assert sorted(found_in(the_secret, values)) == [
        "AWS_ACCESS_KEY_ID/base64", "AWS_SECRET_ACCESS_KEY/base64"]
    # what was read: both ranks' and the Launcher's logs, the MPIJob, the Worker pods
    assert any(k.startswith(f"log {name}-launcher") for k in texts), sorted(texts)
    assert any(k.startswith(f"log {name}-worker-1/") for k in texts), sorted(texts)
    assert f"object MPIJob/{name} (ended)" in texts, sorted(texts)
    assert f"object Pod/{name}-worker-0 (running)" in texts, sorted(texts)
    leaks = {where: hits for where, text in texts.items() if (hits := found_in(text, values))}
    assert leaks == {}, leaks
    # the job's spec names the Secret, never its values
    spec = json.loads(texts[f"object MPIJob/{name} (ended)"])["spec"]
    refs = [e["valueFrom"]["secretKeyRef"] for e in spec["mpiReplicaSpecs"]["Worker"][
        "template"]["spec"]["containers"][0]["env"] if "valueFrom" in e]
    assert {(r["name"], r["key"]) for r in refs} >= {(SECRET, k) for k in values}
    print(f"\nscanned {len(texts)} logs, files and objects of {namespace}: neither value, "
          "raw or base64, in any; both in the Secret (base64), and both reached the ranks")


def test_the_scan_finds_each_form():
    """The pure search: raw and base64 forms, named by value and form."""
    values = {"K": "s3cr3t-value"}
    assert found_in("x s3cr3t-value y", values) == ["K/raw"]
    assert found_in(json.dumps({"data": {"K": base64.b64encode(b"s3cr3t-value").decode()}}),
                    values) == ["K/base64"]
    assert found_in("s3cr3t-valu", values) == []
