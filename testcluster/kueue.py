"""Tier 3: Kueue (sigs.k8s.io/kueue, the version testcluster/go/kueue/go.mod pins,
v0.19.2) on a running :class:`testcluster.controlplane.Plane`, out of cluster in the style
of :mod:`testcluster.operators`: the manager with ``KUBECONFIG``, its webhooks on
127.0.0.1 (a free port of the plane's, :func:`testcluster.operators.ports`) with the
plane's throwaway certificate, the upstream CRDs and webhook configurations read from the
Go module cache and re-pointed at ``https://127.0.0.1:<port>``.

Sources (sigs.k8s.io/kueue@v0.19.2):
- cmd/kueue/main.go: ``--config``; with ``internalCertManagement.enable: false`` it builds a
  certwatcher on the hard-coded ``/etc/kueue/metrics/certs/tls.{crt,key}`` even when metrics
  are off (``metrics.bindAddress: "0"``) and exits when they are absent. Nothing is written
  to the host's /etc: the manager runs in a private mount namespace (``unshare --mount``;
  ``--user --map-root-user`` too when not root) in which an overlay over /etc (upper layer
  on a tmpfs, submounts of /etc bound back) holds those two files (the plane's cert pair).
  The process keeps the pid that :meth:`Plane.stop_process` signals (``unshare`` and ``sh``
  exec into it), so ``controlplane.down`` stops it like every other operator and the
  namespace and its mounts vanish with it.
- apis/config/v1beta2/configuration_types.go, defaults.go: ``leaderElection``,
  ``internalCertManagement``, ``webhook{port,host,certDir}``, ``health``, ``metrics``,
  ``integrations.frameworks`` (names from pkg/controller/jobs/mpijob/mpijob_controller.go
  and trainjob/trainjob_controller.go ``FrameworkName``), ``featureGates``;
  ``namespace`` defaults to kueue-system outside a pod.
- pkg/features/kube_features.go ``VisibilityOnDemand`` (beta, on by default since 0.9):
  turned off, so no visibility API server binds :8082.
- config/components/crd/bases (every CRD) and crd/kustomization.yaml's
  ``patches/webhook_in_*.yaml`` (the CRDs whose conversion goes through ``/convert``).
- config/components/webhook/manifests.yaml: the webhooks on kueue.x-k8s.io objects and on
  MPIJobs / TrainJobs (the pod, Deployment, StatefulSet, Job, ... ones are dropped), with
  the ``namespaceSelector`` that webhook/kustomization.yaml gives the job webhooks.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil

import yaml

from testcluster import modules, operators

NAMESPACE = "kueue-system"
FRAMEWORKS = ("kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob")
#: The resources of the job webhooks kept beside Kueue's own objects.
JOB_RESOURCES = ("mpijobs", "trainjobs")
GROUP = "kueue.x-k8s.io"
CONVERT_PATH = "/convert"

#: Runs the manager ("$2" "$3"...) with /etc/kueue/metrics/certs from "$1"/certs: a tmpfs at
#: "$1"/mnt, an overlay over /etc whose upper layer is on it, submounts of /etc bound back.
_NS_SCRIPT = r"""set -eu
d=$1; shift
mount --make-rprivate /
mount -t tmpfs -o mode=0700,size=4m kfp-gpu-kueue "$d/mnt"
mkdir -p "$d/mnt/upper/kueue/metrics/certs" "$d/mnt/work" "$d/mnt/etc"
cp "$d/certs/tls.crt" "$d/certs/tls.key" "$d/mnt/upper/kueue/metrics/certs/"
mount --rbind /etc "$d/mnt/etc"
subs=$(awk '$5 ~ "^/etc/" {print $5}' /proc/self/mountinfo)
mount -t overlay kfp-gpu-kueue-etc \
  -o "lowerdir=/etc,upperdir=$d/mnt/upper,workdir=$d/mnt/work" /etc
for m in $subs; do mount --bind "$d/mnt/etc/${m#/etc/}" "$m"; done
exec "$@"
"""


def crds(ca: bytes, port: int) -> list[dict]:
    """Every CRD of config/components/crd/bases; those that crd/kustomization.yaml patches
    with ``webhook_in_*.yaml`` convert through ``https://127.0.0.1:<port>/convert``."""
    kust = modules.module_docs("kueue", "config/components/crd/kustomization.yaml")[0]
    docs = []
    for rel in kust["resources"]:
        docs += modules.module_docs("kueue", f"config/components/crd/{rel}")
    converted = {modules.module_docs("kueue", f"config/components/crd/{p['path']}")[0]
                 ["metadata"]["name"] for p in kust.get("patches") or []
                 if "webhook_in_" in p.get("path", "")}
    bundle = base64.b64encode(ca).decode()
    for d in docs:
        if d["metadata"]["name"] in converted:
            d["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": f"https://127.0.0.1:{port}{CONVERT_PATH}",
                                 "caBundle": bundle},
                "conversionReviewVersions": ["v1"]}}
    return docs


def _kept(webhook: dict) -> bool:
    rules = webhook.get("rules") or []
    return any(GROUP in r.get("apiGroups", []) for r in rules) or any(
        res in JOB_RESOURCES for r in rules for res in r.get("resources", []))


def webhooks(ca: bytes, port: int) -> list[dict]:
    """config/components/webhook/manifests.yaml, only the webhooks :func:`_kept` keeps,
    with webhook/kustomization.yaml's ``namespaceSelector`` (NotIn kube-system,
    kueue-system) on the job webhooks, re-pointed by :func:`operators.local_webhooks`."""
    docs = modules.module_docs("kueue", "config/components/webhook/manifests.yaml")
    kust = modules.module_docs("kueue", "config/components/webhook/kustomization.yaml")[0]
    selector = next(w["namespaceSelector"] for p in kust["patches"]
                    for w in yaml.safe_load(p["patch"])["webhooks"])
    selected = {path.split("[name=")[1].split("]")[0]
                for r in kust.get("replacements") or [] for t in r["targets"]
                for path in t["fieldPaths"]}
    for d in docs:
        d["webhooks"] = [w for w in d["webhooks"] if _kept(w)]
        for w in d["webhooks"]:
            if w["name"] in selected:
                w["namespaceSelector"] = copy.deepcopy(selector)
    return operators.local_webhooks(docs, port, ca, "kueue")


def configuration(cert_dir, port: int, health: str) -> dict:
    """The Configuration (config.kueue.x-k8s.io/v1beta2) the manager runs with."""
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": NAMESPACE,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "health": {"healthProbeBindAddress": health},
            "metrics": {"bindAddress": "0"},
            "integrations": {"frameworks": list(FRAMEWORKS)},
            "featureGates": {"VisibilityOnDemand": False}}


def _namespaced_argv(plane, argv: list[str]) -> list[str]:
    """``argv`` run by :data:`_NS_SCRIPT` in a private mount namespace; the plane's cert
    pair staged in <plane>/kueue-etc/certs."""
    d = plane.dir / "kueue-etc"
    (d / "mnt").mkdir(parents=True, exist_ok=True)
    (d / "certs").mkdir(exist_ok=True)
    cert_dir, _ = operators.certs(plane)
    for f in ("tls.crt", "tls.key"):
        shutil.copyfile(cert_dir / f, d / "certs" / f)
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--mount"]
    return [*unshare, "--", "sh", "-c", _NS_SCRIPT, "sh", str(d), *argv]


def start(plane) -> None:
    """Namespace kueue-system, the CRDs (Kueue's, and JobSet's and Trainer's, whose
    TrainJob integration must find its API at start), the manager (waited healthy on its
    health port), then its webhooks (failurePolicy Fail: applied only once it answers).

    Raises:
        RuntimeError: the manager exited or did not become ready (see logs/kueue.log).
    """
    cert_dir, ca = operators.certs(plane)
    if plane.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        plane.kubectl("create", "namespace", NAMESPACE)
    port, health = operators.ports(plane)["kueue_webhook"], operators.health(plane, "kueue")
    plane.apply(crds(ca, port))
    # The APIs of the job frameworks it integrates come first: for one that appears later
    # Kueue sets the controller up then (jobframework/setup.go WaitForAPI), and for
    # TrainJob that fails -- NewReconciler (jobs/trainjob/trainjob_controller.go) runs
    # Trainer's runtime core.New, whose field indexes cannot be added to a started cache
    # ("setting index on runtimeClass for TrainingRuntime" in kueue.log) -- after which
    # Kueue's own TrainJob webhook (vtrainjob.kb.io) refuses every TrainJob with
    # "unsupported runtime: ClusterTrainingRuntime.trainer.kubeflow.org".
    plane.apply(modules.crds("jobset") + modules.crds("trainer"))
    conf = plane.dir / "kueue-config.yaml"
    conf.write_text(yaml.safe_dump(configuration(cert_dir, port, health)))
    argv = [str(plane.bins["kueue"] / "kueue"), f"--config={conf}"]
    plane.start_process("kueue", _namespaced_argv(plane, argv))
    operators.wait_healthy(plane, "kueue", health)
    plane.apply(webhooks(ca, port))


def start_tier3(plane) -> None:
    """Kueue, unless already running (tier 3 on top of :func:`testcluster.operators.
    start_tier2`)."""
    if not plane.running("kueue"):
        start(plane)
