"""A local double of the Kubernetes API server for ``kfp-gpu doctor``.

Real HTTP on 127.0.0.1 (random port), with the API server's semantics for what doctor
reads (k8s.io/apiserver authentication / impersonation / RBAC authorizer behaviour):

- Authentication: ``Authorization: Bearer <token>``; a missing or unknown token gets
  ``401`` with a ``Status`` (reason ``Unauthorized``) on every path.
- Impersonation (``Impersonate-User``): allowed only if the caller may ``impersonate`` the
  target -- ``serviceaccounts`` (core group, the SA's namespace, resourceName = SA name) for
  ``system:serviceaccount:<ns>:<name>``, ``users`` otherwise; else ``403`` in v1.36's
  constrained-impersonation words (``... cannot impersonate-on:serviceaccount:create
  resource "selfsubjectaccessreviews" ...``). The impersonated
  ServiceAccount gets the groups the API server adds (``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>``, ``system:authenticated``).
- Authorization: RBAC rules (apiGroups / resources incl. ``sub/resource`` / verbs,
  ``*`` wildcards, optional resourceNames) from ``Role``+``RoleBinding`` objects (e.g. the
  rendered manifests/rbac) and cluster-wide grants per user or group; a refused request
  gets ``403`` ``Forbidden`` with the API server's message form.
- ``GET /api/v1/nodes``: a ``NodeList`` of the recorded Node objects
  (testcluster/data/k8s_cluster_nodes.json). Needs ``list nodes`` (cluster scope).
- ``GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/<name>``: the CRD or ``404``
  ``NotFound``. Needs ``get customresourcedefinitions`` (apiextensions.k8s.io).
- ``GET /apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes``: the recorded
  ClusterTrainingRuntimes (:attr:`FakeCluster.runtimes`). Needs ``list
  clustertrainingruntimes`` (trainer.kubeflow.org, cluster scope).
- ``GET /api/v1/namespaces/<name>``: the Namespace (:attr:`FakeCluster.namespaces`, name ->
  labels) or ``404`` ``NotFound``. Needs ``get namespaces``, authorised with the namespace
  set to the name itself, as the API server's RequestInfo does for ``/namespaces/<name>``
  (k8s.io/apiserver ``pkg/endpoints/request/requestinfo.go``), so a RoleBinding in that
  namespace grants it.
- ``GET /apis/resource.k8s.io/v1/deviceclasses`` and ``.../resourceslices``
  (cluster-scoped lists): :attr:`FakeCluster.dra` (e.g. tests/doubles/nvidia_dra.py); 404
  when it is None (DRA not served). Needs ``list`` on them (resource.k8s.io).
- ``GET /apis/apps/v1/deployments`` (all namespaces, ``fieldSelector=metadata.name=X``):
  :attr:`FakeCluster.deployments`; ``GET /apis/scheduling.run.ai/v2/queues/<name>``: a KAI
  Queue of :attr:`FakeCluster.kai_queues` or ``404``. Need ``list deployments`` (apps) /
  ``get queues`` (scheduling.run.ai).
- ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: allowed for every
  authenticated user (the ``system:basic-user`` ClusterRole); answers for the effective
  (possibly impersonated) user with ``status.allowed`` and, when allowed, a ``reason``
  naming the binding, as the RBAC authorizer does.

Every request is recorded (method, path, effective user, impersonated-by; a review's
``review``: the (group, resource[/subresource], verb) it asks about) in
:attr:`FakeCluster.requests`.

Upstream files (kubernetes/kubernetes, ``staging/src/k8s.io`` = S, at the commit
``read_file`` served): impersonation S ``apiserver/pkg/endpoints/filters/impersonation.go``
@03400bb1 (the ``impersonate`` verb on ``serviceaccounts`` / ``users``, the groups added
for a ServiceAccount); status bodies S ``apimachinery/pkg/api/errors/errors.go``
@030880a5 (``NewNotFound``: ``<resource>.<group> "<name>" not found``, details
group/kind=resource/name). The 403 texts (``<r>[.<g>] ["<name>"] is forbidden: User "u"
cannot <verb> resource "<r>" in API group "<g>" ...``, and a refused impersonation's
``cannot impersonate-on:serviceaccount:<verb> resource ...`` about the request itself)
were read from kube-apiserver v1.36.3 on the test control plane
(tests/cluster/test_fidelity.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlsplit

from testcluster.nodes import DOUBLE_NODES
from tests.doubles.http import JsonHandler, LoopbackServer

NODES_FILE = DOUBLE_NODES  # the test plane's node list (testcluster/nodes.py)
CRD_PREFIX = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
RUNTIMES_PATH = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
NAMESPACE_PREFIX = "/api/v1/namespaces/"
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
DRA_PREFIX = "/apis/resource.k8s.io/v1/"
DEPLOYMENTS_PATH = "/apis/apps/v1/deployments"
KAI_QUEUE_PREFIX = "/apis/scheduling.run.ai/v2/queues/"


def recorded_nodes() -> list[dict]:
    """The recorded Node objects (a deep copy each call)."""
    return json.loads(NODES_FILE.read_text())["items"]


def mpijob_crd(versions=(("v2beta1", True, True),)) -> dict:
    """The MPI Operator's CRD as v0.8.2 installs it (only the fields doctor reads + names)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org",
                     "annotations": {"controller-gen.kubebuilder.io/version": "v0.14.0"}},
        "spec": {"group": "kubeflow.org", "scope": "Namespaced",
                 "names": {"kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs",
                           "singular": "mpijob", "shortNames": ["mj", "mpij"]},
                 "versions": [{"name": n, "served": s, "storage": st,
                               "schema": {"openAPIV3Schema": {"type": "object"}},
                               "subresources": {"status": {}}}
                              for n, s, st in versions]},
        "status": {"acceptedNames": {"kind": "MPIJob", "plural": "mpijobs"},
                   "storedVersions": [n for n, _, st in versions if st]},
    }


def crd(group: str, kind: str, plural: str, versions=(("v1", True, True),),
        scope: str = "Namespaced") -> dict:
    """A CRD with names and versions only (what doctor reads)."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": n, "served": s, "storage": st}
                                  for n, s, st in versions]}}


def trainer_crds() -> dict:
    """Kubeflow Trainer v2.3.0's TrainJob / ClusterTrainingRuntime CRDs and JobSet's."""
    v1a1 = (("v1alpha1", True, True),)
    return {c["metadata"]["name"]: c for c in (
        crd("trainer.kubeflow.org", "TrainJob", "trainjobs", v1a1),
        crd("trainer.kubeflow.org", "ClusterTrainingRuntime", "clustertrainingruntimes", v1a1,
            "Cluster"),
        crd("jobset.x-k8s.io", "JobSet", "jobsets", (("v1alpha2", True, True),)))}


def kai_queue_crd() -> dict:
    """KAI Scheduler's Queue CRD (scheduling.run.ai), names + versions only."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "queues.scheduling.run.ai"},
            "spec": {"group": "scheduling.run.ai", "scope": "Cluster",
                     "names": {"kind": "Queue", "plural": "queues"},
                     "versions": [{"name": "v2", "served": True, "storage": True}]}}


def kai_scheduler_deployment(ready: int = 1, namespace: str = "kai-scheduler") -> dict:
    """The KAI scheduler's Deployment (``kai-scheduler-default``, the chart's default shard:
    KAI-Scheduler pkg/operator/operands/scheduler/resources_for_shard.go ``DeploymentName``),
    metadata and ``status.readyReplicas`` only."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kai-scheduler-default", "namespace": namespace},
            "status": {"replicas": 1, "readyReplicas": ready}}


ADMIN_RULES = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]


@dataclass
class FakeCluster:
    """The double. ``tokens``: token -> (user, groups). ``cluster_grants``: user or group ->
    cluster-wide rules. ``rbac_objects``: Role / RoleBinding dicts (namespaced grants).
    ``namespaces``: name -> labels of the Namespaces that exist."""

    nodes: list = field(default_factory=recorded_nodes)
    crds: dict = field(default_factory=lambda: {"mpijobs.kubeflow.org": mpijob_crd()})
    tokens: dict = field(default_factory=lambda: {
        "admin-token": ("kubernetes-admin", ["system:masters", "system:authenticated"])})
    cluster_grants: dict = field(default_factory=lambda: {"system:masters": ADMIN_RULES})
    rbac_objects: list = field(default_factory=list)
    runtimes: list = field(default_factory=list)
    namespaces: dict = field(default_factory=lambda: {"kubeflow": {}})
    requests: list = field(default_factory=list)
    #: resource.k8s.io/v1 objects by plural (``deviceclasses``, ``resourceslices``); None:
    #: the API is not served (every path under it is 404).
    dra: dict | None = None
    #: apps/v1 Deployments (``GET /apis/apps/v1/deployments``, ``fieldSelector=metadata.name=X``)
    #: and KAI Queue names (``GET /apis/scheduling.run.ai/v2/queues/<name>``, served while the
    #: CRD ``queues.scheduling.run.ai`` is in :attr:`crds`).
    deployments: list = field(default_factory=list)
    kai_queues: list = field(default_factory=list)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Self:
        self._server = LoopbackServer(_Handler, "cluster", self)
        return self

    def __exit__(self, *exc) -> None:
        self._server.close()

    @property
    def url(self) -> str:
        return self._server.url

    def kubeconfig(self, path: Path, token: str = "admin-token") -> Path:
        """Write a kubeconfig pointing at this server with a bearer token."""
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
        }))
        return path

    # ------------------------------------------------------------------ RBAC
    def _rules(self, user: str, groups: list[str], namespace: str) -> list[tuple[dict, str]]:
        out = []
        for subject in [user, *groups]:
            for rule in self.cluster_grants.get(subject, []):
                out.append((rule, f"cluster grant to {subject}"))
        roles = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o
                 for o in self.rbac_objects if o["kind"] == "Role"}
        for rb in (o for o in self.rbac_objects if o["kind"] == "RoleBinding"):
            ns = rb["metadata"].get("namespace")
            if namespace != ns:
                continue
            bound = False
            for s in rb.get("subjects", []):
                if s["kind"] == "ServiceAccount":
                    bound |= user == f"system:serviceaccount:{s.get('namespace', ns)}:{s['name']}"
                elif s["kind"] == "User":
                    bound |= user == s["name"]
                elif s["kind"] == "Group":
                    bound |= s["name"] in groups
            role = roles.get((ns, rb["roleRef"]["name"]))
            if bound and role:
                for rule in role.get("rules", []):
                    why = (f'RBAC: allowed by RoleBinding "{rb["metadata"]["name"]}/{ns}" of Role '
                           f'"{role["metadata"]["name"]}" to ServiceAccount '
                           f'"{user.rsplit(":", 1)[-1]}/{ns}"')
                    out.append((rule, why))
        return out

    def authorize(self, user: str, groups: list[str], verb: str, group: str, resource: str,
                  namespace: str = "", name: str = "") -> tuple[bool, str]:
        for rule, why in self._rules(user, groups, namespace):
            if not ({"*", group} & set(rule.get("apiGroups", []))):
                continue
            if not ({"*", resource} & set(rule.get("resources", []))):
                continue
            if not ({"*", verb} & set(rule.get("verbs", []))):
                continue
            if rule.get("resourceNames") and name not in rule["resourceNames"]:
                continue
            return True, why
        return False, ""


def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:  # none for 401 (kube-apiserver v1.36.3)
        body["details"] = details
    return body


def _forbidden_msg(user, verb, group, resource, namespace, name=""):
    """The RBAC denial as kube-apiserver v1.36.3 words it (read on the test control plane,
    tests/cluster/test_fidelity.py): ``<resource>[.<group>] ["<name>"] is forbidden: User
    "<u>" cannot <verb> resource "<resource>" in API group "<g>" <scope>``."""
    target = resource.split("/")[0] + (f".{group}" if group else "")
    what = f'{target} "{name}" is forbidden' if name else f"{target} is forbidden"
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    sub = f" {resource}" if "/" in resource else f' resource "{resource}"'
    return (f'{what}: User "{user}" cannot {verb}{sub} in API group "{group}" {scope}')


class _Handler(JsonHandler):
    cluster: FakeCluster

    def _identity(self):
        """(user, groups, impersonator) or None after sending 401/403."""
        c = self.cluster
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        if token not in c.tokens:
            self.send_json(401, _status(401, "Unauthorized", "Unauthorized"))
            return None
        user, groups = c.tokens[token]
        target = self.headers.get("Impersonate-User")
        if not target:
            return user, list(groups), ""
        if target.startswith("system:serviceaccount:"):
            _, _, ns, name = target.split(":", 3)
            ok, _ = c.authorize(user, groups, "impersonate", "", "serviceaccounts", ns, name)
            if not ok:
                # Constrained impersonation (KEP-5284, beta and on in v1.36: k8s.io/apiserver
                # v0.36.3 pkg/endpoints/filters/impersonation/constrained_impersonation.go)
                # tries its modes first and answers with the first one's denial, about the
                # request itself: "cannot impersonate-on:serviceaccount:<verb> resource ..."
                verb, group, resource, rns, rname = self._attributes()
                self._forbid(user, f"impersonate-on:serviceaccount:{verb}", group, resource,
                             rns, rname)
                return None
            return target, ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                            "system:authenticated"], user
        ok, _ = c.authorize(user, groups, "impersonate", "", "users", "", target)
        if not ok:  # the same, in the user-info mode
            verb, group, resource, rns, rname = self._attributes()
            self._forbid(user, f"impersonate-on:user-info:{verb}", group, resource, rns, rname)
            return None
        return target, ["system:authenticated"], user

    def _check(self, who, verb, group, resource, namespace="", name="") -> bool:
        user, groups, _ = who
        ok, _ = self.cluster.authorize(user, groups, verb, group, resource, namespace, name)
        if not ok:
            self._forbid(user, verb, group, resource, namespace, name)
        return ok

    def _forbid(self, user, verb, group, resource, namespace="", name="") -> None:
        """403 with the API server's message and details (name, group when set; kind)."""
        details = {**({"name": name} if name else {}), **({"group": group} if group else {}),
                   "kind": resource.split("/")[0]}
        self.send_json(403, _status(403, "Forbidden", _forbidden_msg(
            user, verb, group, resource, namespace, name), details))

    def _attributes(self) -> tuple[str, str, str, str, str]:
        """(verb, group, resource, namespace, name) of this request, as RequestInfo
        (k8s.io/apiserver pkg/endpoints/request/requestinfo.go) reads the paths served."""
        path = urlsplit(self.path).path
        if self.command == "POST":
            return "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""
        if path.startswith(CRD_PREFIX):
            return ("get", "apiextensions.k8s.io", "customresourcedefinitions", "",
                    path[len(CRD_PREFIX):])
        if path.startswith(NAMESPACE_PREFIX):
            name = path[len(NAMESPACE_PREFIX):]
            return "get", "", "namespaces", name, name
        if path.startswith(DRA_PREFIX):
            return "list", "resource.k8s.io", path[len(DRA_PREFIX):], "", ""
        if path == RUNTIMES_PATH:
            return "list", "trainer.kubeflow.org", "clustertrainingruntimes", "", ""
        return "list", "", "nodes", "", ""

    def _record(self, who) -> dict:
        entry = {"method": self.command, "path": urlsplit(self.path).path,
                 "user": who[0] if who else None, "impersonated_by": who[2] if who else None}
        self.cluster.requests.append(entry)
        return entry

    def do_GET(self):
        path = urlsplit(self.path).path
        who = self._identity()
        self._record(who)
        if who is None:
            return
        c = self.cluster
        if path == "/api/v1/nodes":
            if self._check(who, "list", "", "nodes"):
                self.send_json(200, {"kind": "NodeList", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": "4711"},
                                 "items": copy.deepcopy(c.nodes)})
            return
        if path.startswith(CRD_PREFIX):
            name = path[len(CRD_PREFIX):]
            if not self._check(who, "get", "apiextensions.k8s.io",
                               "customresourcedefinitions", "", name):
                return
            if name not in c.crds:
                self.send_json(404, _status(404, "NotFound", f'customresourcedefinitions.'
                                        f'apiextensions.k8s.io "{name}" not found',
                                        {"name": name, "group": "apiextensions.k8s.io",
                                         "kind": "customresourcedefinitions"}))
                return
            self.send_json(200, copy.deepcopy(c.crds[name]))
            return
        if path.startswith(NAMESPACE_PREFIX) and "/" not in path[len(NAMESPACE_PREFIX):]:
            name = path[len(NAMESPACE_PREFIX):]
            if not self._check(who, "get", "", "namespaces", name, name):
                return
            if name not in c.namespaces:
                self.send_json(404, _status(404, "NotFound", f'namespaces "{name}" not found',
                                            {"name": name, "kind": "namespaces"}))
                return
            self.send_json(200, {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name,
                                              "labels": {"kubernetes.io/metadata.name": name,
                                                         **c.namespaces[name]}},
                                 "spec": {"finalizers": ["kubernetes"]},
                                 "status": {"phase": "Active"}})
            return
        if path == RUNTIMES_PATH and "clustertrainingruntimes.trainer.kubeflow.org" in c.crds:
            if self._check(who, "list", "trainer.kubeflow.org", "clustertrainingruntimes"):
                self.send_json(200, {"apiVersion": "trainer.kubeflow.org/v1alpha1",
                                     "kind": "ClusterTrainingRuntimeList",
                                     "metadata": {"resourceVersion": "4712"},
                                     "items": copy.deepcopy(c.runtimes)})
            return
        if path == DEPLOYMENTS_PATH:
            if self._check(who, "list", "apps", "deployments"):
                query = dict(q.split("=", 1) for q in urlsplit(self.path).query.split("&")
                             if "=" in q)
                want = unquote(query.get("fieldSelector", "")).removeprefix("metadata.name=")
                self.send_json(200, {"apiVersion": "apps/v1", "kind": "DeploymentList",
                                     "metadata": {"resourceVersion": "4714"},
                                     "items": [copy.deepcopy(d) for d in c.deployments
                                               if not want or d["metadata"]["name"] == want]})
            return
        if path.startswith(KAI_QUEUE_PREFIX) and "queues.scheduling.run.ai" in c.crds:
            name = path[len(KAI_QUEUE_PREFIX):]
            if not self._check(who, "get", "scheduling.run.ai", "queues", "", name):
                return
            if name not in c.kai_queues:
                self.send_json(404, _status(404, "NotFound", f'queues.scheduling.run.ai "{name}" '
                                        "not found", {"name": name, "group": "scheduling.run.ai",
                                                      "kind": "queues"}))
                return
            self.send_json(200, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                                 "metadata": {"name": name}, "spec": {}})
            return
        plural = path[len(DRA_PREFIX):] if path.startswith(DRA_PREFIX) else ""
        if c.dra is not None and plural in ("deviceclasses", "resourceslices"):
            if self._check(who, "list", "resource.k8s.io", plural):
                kind = "DeviceClassList" if plural == "deviceclasses" else "ResourceSliceList"
                self.send_json(200, {"apiVersion": "resource.k8s.io/v1", "kind": kind,
                                     "metadata": {"resourceVersion": "4713"},
                                     "items": copy.deepcopy(c.dra.get(plural, []))})
            return
        self.send_json(404, _status(404, "NotFound", "the server could not find the requested "
                                "resource"))

    def do_POST(self):
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        who = self._identity()
        entry = self._record(who)
        if who is None:
            return
        if path != SSAR_PATH:
            self.send_json(404, _status(404, "NotFound", "the server could not find the "
                                    "requested resource"))
            return
        try:
            body = json.loads(raw)
            attrs = body["spec"]["resourceAttributes"]
        except (ValueError, KeyError, TypeError):
            self.send_json(400, _status(400, "BadRequest", "invalid SelfSubjectAccessReview"))
            return
        resource = attrs.get("resource", "")
        if attrs.get("subresource"):
            resource += "/" + attrs["subresource"]
        entry["review"] = (attrs.get("group", ""), resource, attrs.get("verb", ""))
        ok, why = self.cluster.authorize(who[0], who[1], attrs.get("verb", ""),
                                         attrs.get("group", ""), resource,
                                         attrs.get("namespace", ""), attrs.get("name", ""))
        body.setdefault("metadata", {})["creationTimestamp"] = None
        body["status"] = {"allowed": ok, **({"reason": why} if ok else {})}
        self.send_json(201, body)
