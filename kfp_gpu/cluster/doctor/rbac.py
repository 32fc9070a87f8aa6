"""Doctor, subject launcher permissions: one ``SelfSubjectAccessReview``
(authorization.k8s.io/v1) per verb/resource of manifests/rbac/role.yaml, impersonating
``system:serviceaccount:<namespace>:<name>`` (the ``kubectl auth can-i --as`` mechanism;
needs the ``impersonate`` permission) or as the caller itself."""

from __future__ import annotations

import json

from kfp_gpu.cluster.doctor.backends import BACKEND_RESOURCES, BACKENDS
from kfp_gpu.cluster.doctor.model import Access, ClusterFacts, Needs, Report, api_error
from kfp_gpu.mpi.spec import crd, trainjob

#: (apiGroup, resource[/subresource], verb) the launcher needs: manifests/rbac/role.yaml (its
#: rules and its comment; tests/unit/test_launcher_rbac.py keeps them and this table equal).
LAUNCHER_PERMISSIONS: tuple[tuple[str, str, str], ...] = (
    *((crd.GROUP, crd.PLURAL, verb)
      for verb in ("create", "delete", "get", "list", "patch", "watch")),
    *((trainjob.GROUP, trainjob.PLURAL, verb)
      for verb in ("create", "delete", "get", "list", "patch", "watch")),
    ("", "pods", "get"), ("", "pods", "list"),
    ("", "pods/log", "get"),
    ("", "events", "list"),
    *(("resource.k8s.io", "resourceclaimtemplates", verb)
      for verb in ("create", "delete", "get", "patch")),
)
#: What only a ``dra`` GPU request needs (missing: a warning for other requests).
DRA_RESOURCES = {("resource.k8s.io", "resourceclaimtemplates")}


def permissions_summary(permissions=LAUNCHER_PERMISSIONS) -> str:
    """One line naming ``permissions`` ((apiGroup, resource, verb) triples, e.g. the rules of
    manifests/rbac/role.yaml) resource by resource, in their order, resources with the same
    verbs together and a non-core group in parentheses:
    ``mpijobs (kubeflow.org), trainjobs (trainer.kubeflow.org): create/delete/...; pods:
    get/list; ...``. manifests/README.md shows it for the Role (tests/docs/test_docs_restated.py
    compares the two), so the summary a platform team copies is the Role."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb in permissions:
        verbs.setdefault((group, resource), set()).add(verb)
    same: dict[tuple[str, ...], list[str]] = {}
    for (group, resource), vs in verbs.items():
        same.setdefault(tuple(sorted(vs)), []).append(
            f"{resource} ({group})" if group else resource)
    return "; ".join(f"{', '.join(names)}: {'/'.join(vs)}" for vs, names in same.items())


def access_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The permissions table; problems (pipelines that launch a distributed job) or
    warnings for what is missing; what only the other backend needs is a warning."""
    if not facts.access and not facts.access_error:
        return
    rows = [(f"{a.verb} {a.resource}" + (f" ({a.group})" if a.group else ""),
             {True: "yes", False: "NO", None: "?"}[a.allowed] + (
                 f"  {a.reason}" if a.reason and a.allowed is not True else ""))
            for a in facts.access]
    rep.sections.append((f"Launcher permissions: {facts.subject} in {facts.namespace}",
                         ("action", "allowed"), rows))
    other = {BACKEND_RESOURCES[b] for b in BACKENDS if b != needs.backend}
    if needs.request is None or needs.request.kind != "dra":
        other |= DRA_RESOURCES
    spare = [f"{a.verb} {a.resource}" for a in facts.access
             if a.allowed is False and (a.group, a.resource) in other]
    if spare:
        rep.warnings.append(f"{facts.subject} may not {', '.join(spare)} (only needed for the "
                            "other backend or dra: requests); apply manifests/rbac")
    missing = [f"{a.verb} {a.resource}" for a in facts.access
               if a.allowed is False and (a.group, a.resource) not in other]
    unknown = [f"{a.verb} {a.resource}" for a in facts.access if a.allowed is None]
    target = rep.problems if needs.mpi else rep.warnings
    if facts.access_error:
        target.append(f"cannot check {facts.subject}'s permissions: {facts.access_error}")
    if missing:
        target.append(f"{facts.subject} may not {', '.join(missing)} in namespace "
                      f"{facts.namespace}; apply manifests/rbac")
    if unknown and not facts.access_error:
        target.append(f"access review failed for {', '.join(unknown)}")


def _review_body(namespace: str, group: str, resource: str, verb: str) -> dict:
    res, _, sub = resource.partition("/")
    attrs = {"namespace": namespace, "verb": verb, "group": group, "resource": res}
    if sub:
        attrs["subresource"] = sub
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}


def read_access(api_client, facts: ClusterFacts, service_account: str | None) -> None:
    """Review each launcher permission into ``facts.access`` (``service_account`` ""/None:
    the caller's own permissions)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    namespace = facts.namespace
    if service_account:
        subject = f"system:serviceaccount:{namespace}:{service_account}"
        reviewer = client.ApiClient(api_client.configuration)
        reviewer.set_default_header("Impersonate-User", subject)
    else:
        subject, reviewer = "the current user", api_client
    facts.subject = subject
    authz = client.AuthorizationV1Api(reviewer)
    for group, resource, verb in LAUNCHER_PERMISSIONS:
        try:
            resp = authz.create_self_subject_access_review(
                _review_body(namespace, group, resource, verb), _preload_content=False,
                _request_timeout=30)
            st = json.loads(resp.data).get("status", {})
            facts.access.append(Access(group, resource, verb, bool(st.get("allowed")),
                                       st.get("reason", "") or st.get("evaluationError", "")))
        except ApiException as e:
            facts.access_error = api_error(e)
            facts.access = []
            break
