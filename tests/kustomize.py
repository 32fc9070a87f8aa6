"""The repository's kustomize tree (manifests/) as ``kubectl kustomize`` renders it, for the
unit tests: where it is (:data:`MANIFESTS`), which overlays render offline
(:data:`OVERLAYS`), the kubectl to render with (:func:`kubectl`) and the rendering
(:func:`kustomize`). The cluster tests render with the plane's own kubectl
(tests/cluster/objects.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

#: The repository's kustomize tree (manifests/README.md).
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
#: The local overlays: every one renders without the network and validates
#: (tests/test_manifests.py) and is accepted by the real API server
#: (tests/cluster/test_api_accepts.py).
OVERLAYS = ["device-plugin", "rdma", "rbac", "examples/metagpu", "examples/hami", "cluster"]


def kubectl() -> str:
    """``$KUBECTL`` or the ``kubectl`` on PATH; fails the test where there is none."""
    exe = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not exe:
        pytest.fail("kubectl not found: install Debian's kubernetes-client "
                    "(apt-get install -y kubernetes-client) or set KUBECTL")
    return exe


def kustomize(path: Path) -> list[dict]:
    """The documents ``kubectl kustomize <path>`` renders (asserts that it succeeds)."""
    out = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]
