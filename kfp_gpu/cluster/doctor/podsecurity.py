"""Doctor, subject Pod Security admission: the namespace's ``pod-security.kubernetes.io/*``
labels, and what they mean for the distributed job's pods.

Names and rules (kubernetes.io "Pod Security Admission" and "Pod Security Standards";
kubernetes/pod-security-admission ``api/constants.go``): labels
``pod-security.kubernetes.io/<mode>`` with mode ``enforce`` (violating pods are rejected),
``warn`` (the client gets a warning), ``audit`` (an audit annotation), values
``privileged``, ``baseline``, ``restricted``; ``<mode>-version`` pins the policy version. A
mode without its label takes the cluster default (the admission configuration; ``privileged``
unless the cluster administrator changed it).

- ``baseline``, control "Capabilities": adding any capability beyond ``AUDIT_WRITE, CHOWN,
  DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP,
  SETUID, SYS_CHROOT`` is forbidden, so a root Worker with ``rdma=True`` (it adds
  ``IPC_LOCK``, :func:`kfp_gpu.mpi.spec.mpijob.worker_may_run_as_root`) is rejected at
  ``enforce: baseline`` or ``restricted``; the default Workers run as uid 1000 and add none.
- ``restricted`` further requires ``runAsNonRoot: true``, ``allowPrivilegeEscalation:
  false``, ``capabilities.drop: [ALL]`` and a ``seccompProfile`` on every container, which
  the Launcher and Worker pods the builders write do not set.
"""

from __future__ import annotations

import json

from kfp_gpu.cluster.doctor.model import ClusterFacts, Needs, Report, api_error

LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "warn", "audit")
LEVELS = ("privileged", "baseline", "restricted")
#: Capabilities ``baseline`` lets a container add (Pod Security Standards, "Capabilities").
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP",
                         "SETUID", "SYS_CHROOT")
_STANDARDS = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"


def pod_security_labels(labels: dict[str, str]) -> dict[str, str]:
    """``{mode: level}`` and ``{mode-version: version}`` from a namespace's labels (pure)."""
    return {k[len(LABEL_PREFIX):]: v for k, v in sorted(labels.items())
            if k.startswith(LABEL_PREFIX)}


def rdma_offered(facts: ClusterFacts) -> bool:
    """Some node has an ``rdma/<name>`` extended resource allocatable."""
    return any(k.startswith("rdma/") and v > 0 for n in facts.nodes
               for k, v in n.allocatable.items())


def pod_security_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The namespace's Pod Security levels; warnings when they stop the distributed job's
    pods (judged for a pipeline that launches one, or in report-only mode)."""
    ps = facts.pod_security
    if not ps.read and not ps.error:
        return
    ns = facts.namespace
    levels = ps.levels
    rows = [(mode, levels.get(mode, "(unset: cluster default)"),
             levels.get(f"{mode}-version", "-")) for mode in MODES]
    rep.sections.append((f"Pod Security admission: namespace {ns}",
                         ("mode", "level", "version"), rows))
    if ps.error:
        rep.warnings.append(f"cannot read namespace {ns}'s Pod Security labels: {ps.error}")
        return
    if not (needs.mpi or not needs.source):
        return
    enforce = levels.get("enforce", "")
    if enforce in ("baseline", "restricted") and rdma_offered(facts):
        rep.warnings.append(
            f"namespace {ns} enforces Pod Security '{enforce}', which forbids adding "
            f"IPC_LOCK (baseline allows only {', '.join(BASELINE_CAPABILITIES)}; {_STANDARDS}"
            "): distributed jobs with rdma=True whose Workers run as root (ssh=ROOT_SSH, "
            "run_as_user 0) add it and would be rejected; run those in a namespace labelled "
            "pod-security.kubernetes.io/enforce=privileged. The default non-root Workers "
            "add no IPC_LOCK (it would not lift their memlock limit) and are admitted: "
            "their RDMA needs the container runtime's memlock limit unlimited "
            "(docs/distributed.md)")
    for mode in ("warn", "audit"):
        if levels.get(mode) in ("baseline", "restricted") and rdma_offered(facts) \
                and enforce not in ("baseline", "restricted"):
            rep.warnings.append(f"namespace {ns} has Pod Security {mode}={levels[mode]}: "
                                "root RDMA Workers (IPC_LOCK) are admitted but reported")
    if enforce == "restricted":
        rep.warnings.append(
            f"namespace {ns} enforces Pod Security 'restricted': the Launcher and Worker "
            "pods set no runAsNonRoot, allowPrivilegeEscalation: false, capabilities.drop "
            "[ALL] or seccompProfile, so they are rejected unless a webhook adds them")


def read_pod_security(api_client, facts: ClusterFacts) -> None:
    """GET the namespace (needs ``get namespaces``; a RoleBinding in that namespace is
    enough: the API server treats a namespace as living in itself) into ``facts``."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        resp = client.CoreV1Api(api_client).read_namespace(
            facts.namespace, _preload_content=False, _request_timeout=30)
        labels = (json.loads(resp.data).get("metadata") or {}).get("labels") or {}
    except ApiException as e:
        facts.pod_security.error = api_error(e)
        return
    facts.pod_security.levels = pod_security_labels(labels)
    facts.pod_security.read = True
