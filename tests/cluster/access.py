"""The launcher's access on a plane: its ServiceAccount (:data:`SA`) and the project's Role
(manifests/rbac) installed into a namespace, optionally without one verb
(:func:`install_rbac`), and an API client authenticated as that ServiceAccount
(:func:`sa_client`)."""

from __future__ import annotations

import copy

import yaml

from kfp_gpu.kube import api_client
from tests.cluster.objects import kustomized

#: The launcher's ServiceAccount, as manifests/rbac names it.
SA = "kfp-gpu-launcher"


def role_docs(plane) -> list[dict]:
    """The rbac overlay as rendered (ServiceAccount, Role, RoleBinding)."""
    return kustomized(plane, "rbac")


def install_rbac(plane, ns: str, drop: tuple[str, str] | None = None) -> dict:
    """The overlay into ``ns`` (optionally without verb ``drop[1]`` on resource ``drop[0]``);
    returns the Role as applied."""
    docs = copy.deepcopy(role_docs(plane))
    for d in docs:
        d["metadata"]["namespace"] = ns
        for s in d.get("subjects") or []:
            s["namespace"] = ns
        if d["kind"] == "Role" and drop:
            for rule in d["rules"]:
                if drop[0] in rule["resources"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v != drop[1]]
    plane.apply(docs)
    return next(d for d in docs if d["kind"] == "Role")


def sa_client(plane, ns: str, tmp_path):
    """An ApiClient authenticated as system:serviceaccount:<ns>:kfp-gpu-launcher."""
    token = plane.kubectl("create", "token", SA, "-n", ns, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    kc = {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
          "users": [{"name": SA, "user": {"token": token}}],
          "contexts": [{"name": SA, "context": {"cluster": admin["clusters"][0]["name"],
                                                "user": SA, "namespace": ns}}],
          "current-context": SA}
    path = tmp_path / "sa-kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    return api_client(str(path))
