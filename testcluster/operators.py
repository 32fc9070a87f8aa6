"""Tier 2 (JobSet v0.12.0 + Kubeflow Trainer v2.3.0) and tier 3 (Kueue) on a running
:class:`testcluster.controlplane.Plane`: each controller-runtime manager out of cluster
with ``KUBECONFIG``, its webhooks served on 127.0.0.1 with a throwaway certificate, the
upstream webhook configurations re-pointed from their in-cluster Service to
``https://127.0.0.1:<port><path>`` (``clientConfig.url`` + ``caBundle``; the same paths
and rules as the module ships), the upstream CRDs applied from the Go module cache.

Sources (read at the pinned versions):
- JobSet: main.go flags; api/config/v1alpha1 Configuration (``internalCertManagement``,
  ``webhook{port,host,certDir}``, ``leaderElection``, ``health``, ``metrics``);
  config/components/webhook/manifests.yaml; the pod webhooks get the
  ``jobset.sigs.k8s.io/jobset-name Exists`` objectSelector of config/components/webhook/
  patches (they are for JobSet's own pods).
- Trainer: cmd/trainer-controller-manager/main.go (``--config``);
  pkg/apis/config/v1alpha1 Configuration (``certManagement.enable: false`` skips cert
  rotation; the webhook server reads ``$TMPDIR/k8s-webhook-server/serving-certs``, the
  controller-runtime default, as the Configuration has no certDir);
  manifests/base/webhook/manifests.yaml; it needs the JobSet CRD (its jobset plugin
  watches JobSets).
"""

from __future__ import annotations

import base64
import copy
import time
import urllib.request
from pathlib import Path

import yaml

from testcluster import modules
from testcluster.tls import server_cert

#: The loopback ports a plane's managers listen on: chosen free when the plane first needs
#: them and kept in ``<plane>/ports.json``, so two planes run side by side on one machine.
PORTS = ("jobset_webhook", "trainer_webhook", "kueue_webhook", "jobset_health",
         "trainer_health", "kueue_health")


def ports(plane) -> dict[str, int]:
    """``{name: port}`` for :data:`PORTS` on this plane (free ports of 127.0.0.1, picked by
    the kernel on first use, then read back from ``<plane>/ports.json``)."""
    import json
    import socket

    f = plane.dir / "ports.json"
    if f.exists():
        return json.loads(f.read_text())
    socks = []
    try:
        for _ in PORTS:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        out = {name: s.getsockname()[1] for name, s in zip(PORTS, socks, strict=True)}
    finally:
        for s in socks:
            s.close()
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(f)
    return out


def health(plane, manager: str) -> str:
    """``127.0.0.1:<port>`` of ``manager``'s health probe (jobset, trainer, kueue)."""
    return f"127.0.0.1:{ports(plane)[manager + '_health']}"


def certs(plane) -> tuple[Path, bytes]:
    """(cert dir holding tls.crt/tls.key for 127.0.0.1, CA PEM), made once per plane."""
    d = plane.dir / "webhook-certs" / "k8s-webhook-server" / "serving-certs"
    if not (d / "tls.crt").exists():
        d.mkdir(parents=True, exist_ok=True)
        c = server_cert(d, ["127.0.0.1"])
        c.cert_file.rename(d / "tls.crt")
        c.key_file.rename(d / "tls.key")
        c.ca_file.rename(d / "ca.crt")
    return d, (d / "ca.crt").read_bytes()


def local_webhooks(docs: list[dict], port: int, ca: bytes, prefix: str,
                   pod_selector: dict | None = None) -> list[dict]:
    """Upstream webhook configurations re-pointed at ``https://127.0.0.1:<port>``, named
    ``<prefix>-<upstream name>``; webhooks on pods get ``pod_selector`` (or are dropped
    when it is None)."""
    out = []
    for d in copy.deepcopy(docs):
        if d.get("kind") not in ("MutatingWebhookConfiguration",
                                 "ValidatingWebhookConfiguration"):
            continue
        d["metadata"] = {"name": f"{prefix}-{d['metadata']['name']}"}
        hooks = []
        for w in d["webhooks"]:
            path = w["clientConfig"]["service"]["path"]
            w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                 "caBundle": base64.b64encode(ca).decode()}
            if any("pods" in r.get("resources", []) for r in w.get("rules", [])):
                if pod_selector is None:
                    continue
                w["objectSelector"] = pod_selector
            hooks.append(w)
        d["webhooks"] = hooks
        out.append(d)
    return out


def wait_healthy(plane, process: str, addr: str, timeout: float = 90) -> None:
    """Wait for the manager's /readyz on ``addr``; it must stay alive meanwhile."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not plane.running(process):
            raise RuntimeError(f"{process} exited: see {plane.logs / (process + '.log')}")
        try:
            with urllib.request.urlopen(f"http://{addr}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{process} not ready on {addr} in {timeout:.0f} s")


def start_manager(plane, name: str, binary: Path, health: str, config: dict,
                  extra_env: dict[str, str] | None = None) -> None:
    """A controller-runtime manager out of cluster: ``config`` (its Configuration, with
    leader election and metrics off and the health probe on ``health`` added) written to
    <plane>/<name>-config.yaml, the process started with ``--config``, waited for healthy."""
    conf = plane.dir / f"{name}-config.yaml"
    conf.write_text(yaml.safe_dump({**config, "leaderElection": {"leaderElect": False},
                                    "health": {"healthProbeBindAddress": health},
                                    "metrics": {"bindAddress": "0"}}))
    plane.start_process(name, [str(binary), f"--config={conf}"], extra_env=extra_env)
    wait_healthy(plane, name, health)


def start_jobset(plane) -> None:
    """JobSet's CRD, the manager on 127.0.0.1 (:func:`ports`), its webhooks."""
    cert_dir, ca = certs(plane)
    port = ports(plane)["jobset_webhook"]
    plane.apply(modules.crds("jobset"))
    start_manager(plane, "jobset", plane.bins["jobset"] / "jobset", health(plane, "jobset"), {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)}})
    hooks = modules.module_docs("jobset", "config/components/webhook/manifests.yaml")
    plane.apply(local_webhooks(hooks, port, ca, "jobset", pod_selector={
        "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name",
                              "operator": "Exists"}]}))


def start_trainer(plane) -> None:
    """Trainer's CRDs, the manager on 127.0.0.1 (:func:`ports`), its webhooks (JobSet
    first)."""
    cert_dir, ca = certs(plane)
    port = ports(plane)["trainer_webhook"]
    plane.apply(modules.crds("trainer"))
    env_tmp = cert_dir.parent.parent  # $TMPDIR/k8s-webhook-server/serving-certs
    start_manager(plane, "trainer", plane.bins["trainer"] / "trainer-controller-manager",
                  health(plane, "trainer"), {
                      "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                      "kind": "Configuration", "certManagement": {"enable": False},
                      "webhook": {"port": port, "host": "127.0.0.1"}},
                  extra_env={"TMPDIR": str(env_tmp)})
    hooks = modules.module_docs("trainer", "manifests/base/webhook/manifests.yaml")
    plane.apply(local_webhooks(hooks, port, ca, "trainer"))


def start_tier2(plane) -> None:
    """JobSet then Trainer (Trainer needs the JobSet CRD), unless already running."""
    if not plane.running("jobset"):
        start_jobset(plane)
    if not plane.running("trainer"):
        start_trainer(plane)
