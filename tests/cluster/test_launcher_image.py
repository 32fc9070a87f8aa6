"""(b, c) The launcher in its image against the real control plane, as a KFP pod runs it:
host network to the loopback kube-apiserver v1.36.3, a ServiceAccount token and the
cluster's CA mounted at /var/run/secrets/kubernetes.io/serviceaccount (where the kubelet
mounts the projected token), ``KUBERNETES_SERVICE_HOST``/``PORT`` set (kubernetes-client
python ``incluster_config.py`` reads exactly these), the Role of manifests/rbac bound.
Needs the Docker engine and the launcher image too (markers cluster and container).
"""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.cluster import jobs, kube
from tests.cluster.access import SA, install_rbac
from tests.containers.engine import LABEL

pytestmark = pytest.mark.container


def service_account_dir(plane, ns: str, tmp_path):
    """token, ca.crt and namespace as a pod's service-account mount holds them."""
    d = tmp_path / "serviceaccount"
    d.mkdir()
    kc = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = kc["clusters"][0]["cluster"]
    (d / "token").write_text(
        plane.kubectl("create", "token", SA, "-n", ns, "--duration=1h").stdout.strip())
    (d / "ca.crt").write_bytes(Path(cluster["certificate-authority"]).read_bytes())
    (d / "namespace").write_text(ns)
    for f in d.iterdir():
        f.chmod(0o644)
    d.chmod(0o755)
    return d, urlparse(cluster["server"])


@pytest.mark.parametrize("outcome,code", [("succeed", 0), ("fail", 1)])
def test_launcher_image_runs_the_mpijob(plane, api, namespace, tmp_path, docker_client,
                                        image, outcome, code):
    install_rbac(plane, namespace)
    sa, server = service_account_dir(plane, namespace, tmp_path)
    name = "resnet-image"
    job = jobs.component_job(namespace, name)
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.yaml").write_text(yaml.safe_dump(job))
    work.chmod(0o777)
    container = docker_client.containers.run(
        image("launcher"),
        ["python", "-m", "kfp_gpu.mpi.launch.launcher", "--job", "/work/job.yaml",
         "--record", "/work/record.json", "--watch-timeout", "10"],
        detach=True, network_mode="host", labels={LABEL: docker_client.kfp_gpu_session},
        environment={"KUBERNETES_SERVICE_HOST": server.hostname,
                     "KUBERNETES_SERVICE_PORT": str(server.port)},
        volumes={str(sa): {"bind": "/var/run/secrets/kubernetes.io/serviceaccount",
                           "mode": "ro"},
                 str(work): {"bind": "/work", "mode": "rw"}})
    try:
        ended = threading.Event()
        threading.Thread(target=lambda: (container.wait(timeout=300), ended.set()),
                         daemon=True).start()
        jobs.launcher_pod(api, namespace, name)
        jobs.end_launcher(api, namespace, name, outcome)
        assert ended.wait(180), container.logs().decode()[-3000:]
        status = container.wait(timeout=10)
        logs = container.logs().decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == code, logs[-3000:]
    if outcome == "succeed":
        assert f"MPIJob {namespace}/{name}: Succeeded" in logs
    else:
        assert f"MPIJob {name} failed: BackoffLimitExceeded" in logs
    mj = jobs.mpijob(api, namespace, name)
    assert kube.conditions(mj)["Succeeded" if code == 0 else "Failed"]["status"] == "True"
