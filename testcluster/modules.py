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
