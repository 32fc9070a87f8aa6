"""manifests/: every local overlay renders with the oldest kustomize the manifests claim
(tests/support/kustomize.py: the pinned v5.4.2) and validates.

Built-in kinds: kubernetes-validate --strict (Kubernetes 1.30 and the newest schema it has).
Custom resources and config files: JSON schemas under tests/schemas/, written from the
upstream CRDs / Go types (each names its source and version). manifests/mpi-operator is a
pinned remote reference (needs github.com), so it is checked for its pin, not rendered.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kfp_gpu import gpu
from tests.support.kustomize import MANIFESTS, OVERLAYS, command, kustomize, minimum, version_tuple

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
K8S_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
CRD_SCHEMAS = {
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"):
        "network-attachment-definition-v1.schema.json",
    ("kubeflow.org/v2beta1", "MPIJob"): "mpijob-v2beta1.schema.json",
}
LAUNCHER_RULES = {
    ("kubeflow.org", "mpijobs"): {"create", "get", "list", "watch", "delete", "patch"},
    ("trainer.kubeflow.org", "trainjobs"): {"create", "get", "list", "watch", "delete",
                                            "patch"},
    ("", "pods"): {"get", "list"},  # no verb nothing uses
    ("", "pods/log"): {"get"},
    ("", "events"): {"list"},
    ("resource.k8s.io", "resourceclaimtemplates"): {"create", "get", "delete",
                                                    "patch"},  # dra requests; patch: co-owners
}


@cache
def render(overlay: str) -> tuple:
    docs = tuple(kustomize(MANIFESTS / overlay))
    assert docs, f"{overlay} renders nothing"
    return docs


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def validate_object(obj: dict) -> None:
    key = (obj["apiVersion"], obj["kind"])
    if key in CRD_SCHEMAS:
        jsonschema.validate(obj, schema(CRD_SCHEMAS[key]))
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(overlay):
    for obj in render(overlay):
        validate_object(obj)
        assert obj["metadata"].get("namespace"), f"{obj['kind']} {obj['metadata']['name']} " \
            "has no namespace: every kfp-gpu object is namespaced"


def test_validators_reject_bad_objects():
    """The gates themselves work: a misspelt Role field and a NAD without spec.config type."""
    role = copy.deepcopy(next(o for o in render("rbac") if o["kind"] == "Role"))
    role["rules"][0]["verb"] = role["rules"][0].pop("verbs")
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object(role)
    nad = copy.deepcopy(next(o for o in render("rdma")
                             if o["kind"] == "NetworkAttachmentDefinition"))
    nad["spec"]["configs"] = nad["spec"].pop("config")
    with pytest.raises(jsonschema.ValidationError):
        validate_object(nad)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate({"apiVersion": "example.com/v1", "kind": "Unknown",
                                      "metadata": {"name": "x"}}, "1.30.0", strict=True)


def _device_plugin_configs() -> dict[str, dict]:
    (cm,) = [o for o in render("device-plugin") if o["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "kfp-gpu-device-plugin-configs"
    return {key: yaml.safe_load(text) for key, text in cm["data"].items()}


def test_device_plugin_configs_follow_the_plugin_format():
    configs = _device_plugin_configs()
    assert set(configs) == {"default", "time-slicing", "mps", "mig-mixed"}
    sch = schema("nvidia-device-plugin-config-v1.schema.json")
    for key, cfg in configs.items():
        jsonschema.validate(cfg, sch), key
    ts = configs["time-slicing"]["sharing"]["timeSlicing"]
    mps = configs["mps"]["sharing"]["mps"]
    assert configs["mig-mixed"]["flags"]["migStrategy"] == "mixed"
    assert "sharing" not in configs["default"] and "sharing" not in configs["mig-mixed"]
    # Renamed replicas are what kfp_gpu.gpu asks for with "shared:1,renamed=true".
    shared = gpu.parse("shared:1,renamed=true,replicas=4")
    for rr in (ts, mps):
        assert rr["renameByDefault"] is True
        assert rr["resources"][0]["name"] == gpu.GPU_RESOURCE
        assert f"{rr['resources'][0]['name']}.shared" == shared.resource_name
        assert rr["resources"][0]["replicas"] == shared.sharing.replicas


def test_device_plugin_schema_rejects_bad_configs():
    sch = schema("nvidia-device-plugin-config-v1.schema.json")
    bad = [
        {"version": "v2"},
        {"version": "v1", "flags": {"migStrategy": "both"}},
        {"version": "v1", "sharing": {"timeSlicing": {"resources": []}}},
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 0}]}}},
        {"version": "v1", "sharing": {"mps": {"resources": [
            {"name": "nvidia.com/gpus", "replicas": 2}]}}},
        {"version": "v1", "sharing": {"timeSlicing": {"renameByDefualt": True, "resources": [
            {"name": "nvidia.com/gpu", "replicas": 2}]}}},
    ]
    for cfg in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(cfg, sch)


def test_rdma_config_and_network():
    objs = render("rdma")
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == ("rdma-devices",
                                                                     "kube-system")
    cfg = json.loads(cm["data"]["config.json"])
    jsonschema.validate(cfg, schema("rdma-shared-device-plugin-config.schema.json"))
    # The resources the MPIJob builder knows are the ones this config advertises.
    from kfp_gpu.mpi.spec import network
    advertised = {f"rdma/{c['resourceName']}" for c in cfg["configList"]}
    assert {network.RDMA_SHARED_DEVICE_A, network.RDMA_HCA_SHARED_DEVICES_A} <= advertised
    (nad,) = [o for o in objs if o["kind"] == "NetworkAttachmentDefinition"]
    nad_schema = schema("network-attachment-definition-v1.schema.json")
    cni = json.loads(nad["spec"]["config"])
    jsonschema.validate(cni, {**nad_schema["$defs"]["CniConfig"], "$defs": nad_schema["$defs"]})
    assert cni["name"] == nad["metadata"]["name"]
    assert nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] in advertised


def test_rdma_schema_rejects_bad_config():
    sch = schema("rdma-shared-device-plugin-config.schema.json")
    for cfg in ({"configList": [{"resourceName": "rdma/a"}]},
                {"configList": [{"resourceName": "a", "rdmaHcaMax": -1}]},
                {"configList": [{"resourceName": "a", "devices": ["ib0"],
                                 "selectors": {"ifNames": ["ib0"]}}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(cfg, sch)


def test_rbac_is_the_launcher_role_and_namespaced_only():
    objs = render("rbac")
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == ["Role", "RoleBinding", "ServiceAccount"]
    (role,) = [o for o in objs if o["kind"] == "Role"]
    rules: dict = {}
    for r in role["rules"]:
        assert not r.get("resourceNames") and not r.get("nonResourceURLs")
        for group in r["apiGroups"]:
            for res in r["resources"]:
                rules.setdefault((group, res), set()).update(r["verbs"])
    assert rules == LAUNCHER_RULES
    (sa,) = [o for o in objs if o["kind"] == "ServiceAccount"]
    (rb,) = [o for o in objs if o["kind"] == "RoleBinding"]
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": role["metadata"]["name"]}
    assert {"kind": "ServiceAccount", "name": sa["metadata"]["name"],
            "namespace": sa["metadata"]["namespace"]} in rb["subjects"]
    for overlay in OVERLAYS:
        for o in render(overlay):
            assert not o["kind"].startswith("Cluster"), f"{overlay}: {o['kind']} is cluster-wide"
    from kfp_gpu.cluster import doctor
    assert doctor.LAUNCHER_PERMISSIONS == tuple(
        (g, r, v) for (g, r), verbs in LAUNCHER_RULES.items() for v in sorted(verbs))
    assert {"kind": "ServiceAccount", "name": doctor.DEFAULT_SERVICE_ACCOUNT,
            "namespace": sa["metadata"]["namespace"]} in rb["subjects"]


def test_rbac_binds_kfp_runner_accounts_in_the_chosen_namespace(tmp_path):
    # KFP runs every pod of a run under one account, which needs KFP's own permissions:
    # the launcher Role goes to KFP's runner accounts (standalone pipeline-runner,
    # multi-user default-editor), in whatever namespace the kustomization is set to.
    for ns in ("kubeflow", "team-a"):
        d = tmp_path / ns
        shutil.copytree(MANIFESTS / "rbac", d)
        k = d / "kustomization.yaml"
        k.write_text(k.read_text().replace("namespace: kubeflow", f"namespace: {ns}", 1))
        (rb,) = [o for o in kustomize(d) if o["kind"] == "RoleBinding"]
        assert rb["metadata"]["namespace"] == ns
        assert {(s["name"], s.get("namespace")) for s in rb["subjects"]} == {
            ("pipeline-runner", ns), ("default-editor", ns), ("kfp-gpu-launcher", ns)}


def test_the_operator_lease_grant_is_get_on_the_leases_the_launcher_reads_and_no_more():
    """rbac-operator-leases (opt-in): per Lease of kfp_gpu.mpi.launch.stall.OPERATOR_LEASES
    a Role in its namespace with ``get`` on that one Lease by name, bound to the accounts
    ../rbac binds (in rbac's namespace); no other object, verb or resource."""
    from kfp_gpu.mpi.launch.stall import OPERATOR_LEASES

    objs = render("rbac-operator-leases")
    roles = {o["metadata"]["namespace"]: o for o in objs if o["kind"] == "Role"}
    bindings = {o["metadata"]["namespace"]: o for o in objs if o["kind"] == "RoleBinding"}
    assert len(objs) == len(roles) + len(bindings)
    assert {(ns, r["rules"][0]["resourceNames"][0]) for ns, r in roles.items()} == {
        (lease.namespace, lease.name) for lease in OPERATOR_LEASES.values()}
    (base,) = [o for o in render("rbac") if o["kind"] == "RoleBinding"]
    for ns, role in roles.items():
        assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                  "resourceNames": role["rules"][0]["resourceNames"],
                                  "verbs": ["get"]}]
        assert len(role["rules"][0]["resourceNames"]) == 1
        rb = bindings[ns]
        assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": role["metadata"]["name"]}
        assert rb["subjects"] == base["subjects"]


@pytest.mark.parametrize("overlay,request_text", [
    ("examples/metagpu", "metagpu:50"),
    ("examples/hami", "hami:1,mem=8000,cores=30"),
])
def test_examples_match_the_request_model(overlay, request_text):
    (pod,) = render(overlay)
    frag = gpu.parse(request_text).pod_fragment()
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == frag["resources"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert {e["name"]: e["value"] for e in frag["env"]}.items() <= env.items()
    for tol in frag["tolerations"]:
        assert tol in pod["spec"]["tolerations"]


def test_cluster_overlay_is_the_union_of_the_local_bases():
    def names(objs):
        return sorted((o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs)
    assert names(render("cluster")) == names(
        render("device-plugin") + render("rdma") + render("rbac"))


def test_mpi_operator_is_a_pinned_release():
    kust = yaml.safe_load((MANIFESTS / "mpi-operator" / "kustomization.yaml").read_text())
    refs = kust.get("bases", []) + kust.get("resources", [])
    assert len(refs) == 1
    m = re.fullmatch(r"github\.com/kubeflow/mpi-operator/manifests/overlays/standalone"
                     r"\?ref=(v\d+\.\d+\.\d+)", refs[0])
    assert m, f"not a pinned upstream release tag: {refs[0]}"
    from kfp_gpu.cluster import doctor
    assert m.group(1) == doctor.MPI_OPERATOR_RELEASE
    # doctor looks for the CRD of the API the MPIJob builder writes (one set of names).
    from kfp_gpu.mpi.spec import crd
    assert doctor.MPIJOB_CRD == f"{crd.PLURAL}.{crd.GROUP}"
    # Upstream's release-0.8 overlay sets the floating image tag "0.8"; the exact release
    # image (published by its semver workflow) is pinned here.
    assert kust.get("images") == [{"name": "mpioperator/mpi-operator",
                                   "newTag": m.group(1).removeprefix("v")}]


#: The pages that tell a user which kustomize (inside kubectl) the manifests need.
MINIMUM_PAGES = ("manifests/README.md", "docs/cluster.md", "docs/install.md")


@pytest.mark.parametrize("page", MINIMUM_PAGES)
def test_the_pages_state_the_kustomize_the_tests_render_with(page):
    """"kustomize v5.4.2 or newer" on each page is the pinned kustomize
    (testcluster/go/kustomize/go.mod), the one CI renders every overlay with."""
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))
    stated = re.findall(r"kustomize (v\d+\.\d+\.\d+) or newer", text)
    assert stated and set(stated) == {minimum()}, (page, stated, minimum())


def test_the_renderer_is_the_pinned_kustomize_or_newer():
    """The pinned build reports the pinned version (build.sh stamps it as kustomize's
    release build does); a kubectl used off CI embeds one at least that new."""
    exe, verb = command()
    if verb == "build":
        out = subprocess.run([exe, "version"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.strip()
        assert out == minimum()
    else:
        out = subprocess.run([exe, "version", "--client", "-o", "json"], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        assert version_tuple(json.loads(out)["kustomizeVersion"]) >= version_tuple(minimum())


def test_the_kustomizations_use_no_field_deprecated_in_the_minimum():
    """kustomize v5 deprecates `bases` (and warns on every render): folders are resources."""
    for k in sorted(MANIFESTS.rglob("kustomization.yaml")):
        assert not {"bases", "patchesStrategicMerge", "patchesJson6902", "commonLabels",
                    "vars"} & set(yaml.safe_load(k.read_text())), k
