"""kwok Stages for the test control plane: kwok's own fast node and pod lifecycles, plus
three test-owned stages that end or restart a pod on demand. Pure: builds YAML documents
from kwok's upstream stage files (read from the Go module cache, as a PyPI package's data
files are read) and strings; no I/O beyond reading them.

kwokctl replaces its default stages by the ones a configuration file carries
(sigs.k8s.io/kwok@v0.8.0 pkg/kwokctl/runtime/cluster.go, ``getDefaultNodeStages`` /
``getDefaultPodStages`` are used only when the file has none), so the list is whole:

- ``node-initialize`` and ``node-heartbeat-with-lease`` (kwok's defaults for a binary
  runtime with node leases: kustomize/stage/node/fast, node/heartbeat-with-lease);
- ``pod-ready`` (kustomize/stage/pod/fast/pod-ready.yaml) with one more selector term: a
  pod annotated :data:`HOLD` stays Pending, not ready (kwok has no kubelet and ignores
  readiness probes);
- ``pod-delete`` (pod/fast/pod-delete.yaml): a pod being deleted goes away;
- NOT kwok's ``pod-complete``: it ends every Job-owned pod with exit 0 at once, and the
  tests decide how a Launcher ends;
- :data:`OUTCOME` = ``succeed`` / ``fail`` on a Running pod ends it: phase Succeeded or
  Failed, each container ``terminated`` with exit code :data:`EXIT_CODE` (default 0 / 1),
  reason Completed / Error, after :data:`AFTER` (a Go duration, default 1s). The shape is
  kwok's pod/chaos/pod-container-running-failed.yaml and pod/general/pod-complete.yaml.
  Set the annotations in a pod template or patch them onto a live pod (kwok re-evaluates
  a pod when it changes);
- :data:`RESTARTS` = ``N`` on a Running pod: the kubelet's picture of a container that
  crashed and was restarted N times in place (restartPolicy OnFailure/Always): phase stays
  Running, ``restartCount: N``, ``lastState.terminated.exitCode`` 1. Fires once per pod
  (guarded on ``lastState.terminated`` being absent).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from testcluster import modules

PREFIX = "kfp-gpu.test"
#: Annotation: a pod that carries it never becomes ready (pod-ready skips it).
HOLD = f"{PREFIX}/hold"
#: Annotation: ``succeed`` or ``fail`` ends a Running pod.
OUTCOME = f"{PREFIX}/outcome"
#: Annotation: the containers' exit code when the pod ends (default 0 / 1).
EXIT_CODE = f"{PREFIX}/exit-code"
#: Annotation: how long after the pod is Running (or the annotation appears) it ends.
AFTER = f"{PREFIX}/after"
#: Annotation: restart count to report for a Running pod (once).
RESTARTS = f"{PREFIX}/restarts"

UPSTREAM = ("node/fast/node-initialize.yaml",
            "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
            "pod/fast/pod-ready.yaml",
            "pod/fast/pod-delete.yaml")


def kwok_dir() -> Path:
    """The kwok module in the Go module cache, at the version testcluster/go/kwok
    pins (downloaded by build.sh's go build)."""
    return modules.module_dir("sigs.k8s.io/kwok",
                              modules.pinned_version("kwok", "sigs.k8s.io/kwok"))


def upstream_stage(rel: str) -> dict:
    """kwok's stage file ``kustomize/stage/<rel>`` as a dict."""
    return yaml.safe_load((kwok_dir() / "kustomize" / "stage" / rel).read_text())


def _expr(key: str, op: str, values: list[str] | None = None) -> dict:
    e = {"key": key, "operator": op}
    if values is not None:
        e["values"] = values
    return e


def _ann(name: str) -> str:
    return f'.metadata.annotations["{name}"]'


def _running_live() -> list[dict]:
    return [_expr(".metadata.deletionTimestamp", "DoesNotExist"),
            _expr(".status.phase", "In", ["Running"])]


_END_TEMPLATE = """\
{{{{ $now := Now }}}}
{{{{ $a := or .metadata.annotations dict }}}}
{{{{ $code := or ( index $a "{exit_code}" ) {default_code} }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  reason: PodCompleted
  type: Ready
- lastTransitionTime: {{{{ $now | Quote }}}}
  status: "False"
  reason: PodCompleted
  type: ContainersReady
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{{{ $code }}}}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {reason}
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {phase}
"""

_RESTART_TEMPLATE = """\
{{{{ $now := Now }}}}
{{{{ $a := or .metadata.annotations dict }}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: true
  restartCount: {{{{ index $a "{restarts}" }}}}
  started: true
  lastState:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{{{ $now | Quote }}}}
      finishedAt: {{{{ $now | Quote }}}}
  state:
    running:
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: Running
"""


def outcome_stage(outcome: str) -> dict:
    """The stage that ends a Running pod annotated ``OUTCOME=outcome`` (succeed|fail)."""
    phase, reason, code = (("Succeeded", "Completed", 0) if outcome == "succeed"
                           else ("Failed", "Error", 1))
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": f"kfp-gpu-pod-{outcome}"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [*_running_live(),
                                              _expr(_ann(OUTCOME), "In", [outcome])]},
            "delay": {"durationMilliseconds": 1000,
                      "durationFrom": {"expressionFrom": _ann(AFTER)}},
            "next": {"statusTemplate": _END_TEMPLATE.format(
                exit_code=EXIT_CODE, default_code=code, reason=reason, phase=phase)},
        },
    }


def restart_stage() -> dict:
    """The stage that reports ``RESTARTS`` in-place restarts of a Running pod, once."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "kfp-gpu-pod-restarts"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [
                *_running_live(), _expr(_ann(RESTARTS), "Exists"),
                _expr(".status.containerStatuses.[0].lastState.terminated", "DoesNotExist")]},
            "delay": {"durationMilliseconds": 500},
            "next": {"statusTemplate": _RESTART_TEMPLATE.format(restarts=RESTARTS)},
        },
    }


def all_stages() -> list[dict]:
    """Every stage the test control plane runs, in kwokctl's configuration order."""
    stages = [upstream_stage(rel) for rel in UPSTREAM]
    for s in stages:
        if s["metadata"]["name"] == "pod-ready":
            s["spec"]["selector"]["matchExpressions"].append(_expr(_ann(HOLD), "DoesNotExist"))
    return [*stages, outcome_stage("succeed"), outcome_stage("fail"), restart_stage()]
