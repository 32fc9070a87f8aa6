"""The repository's kustomize tree (manifests/) as the oldest kustomize it claims renders
it, for the unit tests: where it is (:data:`MANIFESTS`), which overlays render offline
(:data:`OVERLAYS`), the oldest kustomize the manifests claim (:func:`minimum`: the version
testcluster/go/kustomize/go.mod pins, built by ``testcluster/build.sh kustomize`` with tier
1), the command that renders (:func:`command`) and the rendering (:func:`kustomize`). The
cluster tests render with the plane's own kubectl (tests/cluster/objects.py), whose
kustomize is the newest the repository pins (testcluster/go/k8s/go.mod): both ends run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import yaml

#: The repository's kustomize tree (manifests/README.md).
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
#: The local overlays: every one renders without the network and validates
#: (tests/unit/test_manifests.py) and is accepted by the real API server
#: (tests/cluster/test_api_accepts.py).
OVERLAYS = ["device-plugin", "rdma", "rbac", "rbac-operator-leases", "examples/metagpu",
            "examples/hami", "cluster"]
#: The Go module of the standalone kustomize (testcluster/go/kustomize/go.mod).
MODULE = "sigs.k8s.io/kustomize/kustomize/v5"


def minimum() -> str:
    """The oldest kustomize the manifests claim (``v5.4.2``): the version of :data:`MODULE`
    that testcluster/go/kustomize/go.mod pins, the one CI renders with."""
    from testcluster import modules

    return modules.pinned_version("kustomize", MODULE)


def version_tuple(v: str) -> tuple[int, ...]:
    """``v5.4.2`` (or ``v5.0.4-0.2023...``, kubectl's pseudo-versions) -> ``(5, 4, 2)``.

    Raises:
        ValueError: no ``vX.Y.Z`` in ``v``.
    """
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", v.strip())
    if not m:
        raise ValueError(f"not a kustomize version: {v!r}; accepted: vX.Y.Z")
    return tuple(int(x) for x in m.groups())


@cache
def command() -> tuple[str, ...]:
    """The command that renders a kustomization folder (append the folder):

    1. the pinned kustomize (``kustomize build``), when testcluster/build.sh built it;
    2. else, off CI, ``$KUBECTL`` or the ``kubectl`` on PATH (``kubectl kustomize``) when
       the kustomize inside it is at least :func:`minimum` (``kubectl version --client -o
       json`` names it, ``kustomizeVersion``).

    Skips the test otherwise, naming the build command; under ``CI=true`` fails instead
    (tier 1 is always built there: :func:`tests.cluster.tiers.unavailable`).
    """
    r = subprocess.run(["bash", str(MANIFESTS.parent / "testcluster" / "build.sh"), "--dir",
                        "kustomize"], capture_output=True, text=True, check=False)
    if r.returncode == 0 and r.stdout.strip():
        return (str(Path(r.stdout.strip()) / "kustomize"), "build")
    from tests.cluster.tiers import unavailable
    from tests.containers.conftest import in_ci

    reason = (f"the pinned kustomize {minimum()} is not built (bash testcluster/build.sh "
              "kustomize)")
    exe = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if exe and not in_ci():
        out = subprocess.run([exe, "version", "--client", "-o", "json"], capture_output=True,
                             text=True, timeout=60, check=False)
        found = json.loads(out.stdout or "{}").get("kustomizeVersion", "") \
            if out.returncode == 0 else ""
        if found and version_tuple(found) >= version_tuple(minimum()):
            return (exe, "kustomize")
        reason += f"; {exe} embeds kustomize {found or '(unknown)'}, older than that"
    unavailable(reason, "tier1")
    raise AssertionError("unreachable")  # unavailable never returns


def render(path: Path) -> str:
    """The text :func:`command` renders for the kustomization folder ``path`` (asserts that
    it succeeds, with its stderr)."""
    out = subprocess.run([*command(), str(path)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, f"{' '.join(command())} {path}:\n{out.stderr}"
    return out.stdout


def kustomize(path: Path) -> list[dict]:
    """The documents :func:`render` renders for ``path``."""
    return [d for d in yaml.safe_load_all(render(path)) if d]
