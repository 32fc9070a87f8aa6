"""Files the pinned Go modules ship (CRDs, webhook and runtime manifests), read from the Go
module cache the way a PyPI package's data files are read: the version of each module is
the one its wrapper go.mod in testcluster/go pins, so the CRDs always match the
controllers that run. Nothing read here is copied into the repository.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path

import yaml

GOMODS = Path(__file__).resolve().parent / "go"

#: name -> (wrapper folder, module path, CRD files inside the module).
CRDS = {
    "mpi-operator": ("mpi-operator", "github.com/kubeflow/mpi-operator",
                     ["manifests/base/kubeflow.org_mpijobs.yaml"]),
    # scheduler-plugins at the version mpi-operator v0.8.2's go.mod requires.
    "podgroup": ("mpi-operator", "sigs.k8s.io/scheduler-plugins",
                 ["config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"]),
    "jobset": ("jobset", "sigs.k8s.io/jobset",
               ["config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"]),
    "trainer": ("trainer", "github.com/kubeflow/trainer/v2",
                ["manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
                 "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
                 "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml"]),
}


def pinned_version(wrapper: str, module: str) -> str:
    """The version of ``module`` that testcluster/go/<wrapper>/go.mod selects."""
    text = (GOMODS / wrapper / "go.mod").read_text(encoding="utf-8")
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if not m:
        raise LookupError(f"{module} is not in testcluster/go/{wrapper}/go.mod")
    return m.group(1)


@cache
def module_dir(module: str, version: str) -> Path:
    """The extracted module in the Go module cache (``go mod download`` fetches it once)."""
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                         check=True, capture_output=True, text=True, timeout=600)
    return Path(json.loads(out.stdout)["Dir"])


def module_file(wrapper: str, module: str, rel: str) -> Path:
    """``rel`` inside ``module`` at the version ``wrapper``'s go.mod pins."""
    return module_dir(module, pinned_version(wrapper, module)) / rel


#: What each tool of testcluster/build.sh builds, as the docs name it: tool -> (name in
#: prose, the main module its wrapper go.mod pins). ``kubelet`` is built from the ``k8s``
#: wrapper (build.sh ``moddir``).
COMPONENTS = {
    "k8s": ("Kubernetes", "k8s.io/kubernetes"),
    "etcd": ("etcd", "go.etcd.io/etcd/server/v3"),
    "kwok": ("kwok", "sigs.k8s.io/kwok"),
    "mpi-operator": ("mpi-operator", "github.com/kubeflow/mpi-operator"),
    "kustomize": ("kustomize", "sigs.k8s.io/kustomize/kustomize/v5"),
    "jobset": ("JobSet", "sigs.k8s.io/jobset"),
    "trainer": ("Trainer", "github.com/kubeflow/trainer/v2"),
    "kueue": ("Kueue", "sigs.k8s.io/kueue"),
    "kubelet": ("kubelet, kube-proxy", "k8s.io/kubernetes"),
    "containerd": ("containerd", "github.com/containerd/containerd/v2"),
    "runc": ("runc", "github.com/opencontainers/runc"),
    "cni-plugins": ("CNI plugins", "github.com/containernetworking/plugins"),
    "coredns": ("CoreDNS", "github.com/coredns/coredns"),
    "dra-example-driver": ("dra-example-driver", "sigs.k8s.io/dra-example-driver"),
}
BUILD_SH = Path(__file__).resolve().parent / "build.sh"


def wrapper(tool: str) -> str:
    """The folder under testcluster/go that builds ``tool`` (build.sh ``moddir``)."""
    return "k8s" if tool == "kubelet" else tool


def tiers() -> dict[str, list[str]]:
    """build.sh's tiers in its order: ``{"tier1": ["k8s", "etcd", ...], ..., "node": [...]}``
    (its ``NAME=(tool ...)`` arrays), the one list of what the plane runs.

    Raises:
        LookupError: build.sh has no such arrays.
    """
    found = re.findall(r"^(tier\d|node)=\(([^)]*)\)", BUILD_SH.read_text(encoding="utf-8"),
                       re.MULTILINE)
    if not found:
        raise LookupError(f"no tier arrays (tier1=(...)) in {BUILD_SH}")
    return {name: tools.split() for name, tools in found}


def versions() -> list[tuple[str, str, str, str, str]]:
    """The tier/version table: one ``(tier, tool, name, module, version)`` per tool of
    :func:`tiers`, the version the tool's wrapper go.mod selects (what build.sh builds).

    Raises:
        KeyError: a tool of build.sh that :data:`COMPONENTS` does not name.
        LookupError: a wrapper go.mod that does not pin the tool's module.
    """
    rows = []
    for tier, tools in tiers().items():
        for tool in tools:
            name, module = COMPONENTS[tool]
            rows.append((tier, tool, name, module, pinned_version(wrapper(tool), module)))
    return rows


def version_table() -> str:
    """:func:`versions` as a Markdown table (tier, tool, module, version): the plane's
    components at the versions the go.mod files pin; testcluster/README.md shows it and
    tests/docs/test_docs_restated.py compares every "<tool> vX.Y.Z" of the docs with it."""
    lines = ["| tier | tool | module (testcluster/go/&lt;tool&gt;/go.mod) | version |",
             "|---|---|---|---|"]
    lines += [f"| {tier.removeprefix('tier')} | {name} | {module} | {version} |"
              for tier, _tool, name, module, version in versions()]
    return "\n".join(lines)


#: tool -> (wrapper folder, module path) for :func:`module_docs`.
TOOLS = {"jobset": ("jobset", "sigs.k8s.io/jobset"),
         "trainer": ("trainer", "github.com/kubeflow/trainer/v2"),
         "kueue": ("kueue", "sigs.k8s.io/kueue"),
         "mpi-operator": ("mpi-operator", "github.com/kubeflow/mpi-operator")}


def module_docs(tool: str, rel: str) -> list[dict]:
    """The YAML documents of file ``rel`` in ``tool``'s pinned module."""
    wrapper, module = TOOLS[tool]
    text = module_file(wrapper, module, rel).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def crds(name: str) -> list[dict]:
    """The CRD documents of :data:`CRDS` ``name`` as dicts."""
    wrapper, module, files = CRDS[name]
    docs = []
    for rel in files:
        text = module_file(wrapper, module, rel).read_text(encoding="utf-8")
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs
