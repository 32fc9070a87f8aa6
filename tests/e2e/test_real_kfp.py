"""Opt-in (marker ``e2e``): ``kfp-gpu submit`` to a real KFP, waiting for SUCCEEDED.

Skipped unless ``KFP_GPU_E2E_HOST`` names the KFP API; the token comes from ``KFP_TOKEN``
(or the ServiceAccount token file), exactly as a user's CI passes it: this module runs in
the caller's environment (tests/unit/test_submit.py runs under ``kfp_client_env``, which
clears the token, the host and the kubeconfig). Data is named by the environment, never a
default that downloads (imdb-lstm's ``keras:imdb`` needs internet):

- ``KFP_GPU_E2E_PIPELINE`` (default ``imdb-lstm``);
- ``KFP_GPU_E2E_SOURCE`` -> ``--param source=...`` (required when the pipeline declares
  ``source``);
- ``KFP_GPU_E2E_PARAMS="k=v,k=v"`` -> one ``--param`` each (a comma splits only before
  ``name=``, so JSON lists stay whole);
- ``KFP_GPU_E2E_NAMESPACE``, ``KFP_GPU_E2E_TIMEOUT`` (seconds, default 3600),
  ``KFP_GPU_E2E_POLL`` (seconds between run status reads, default 15).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kfp_gpu.cli import submit as submit_cli
from kfp_gpu.compiler.compile import compiled_pipeline
from tests.doubles.kfp_api import FakeKfp

REPO = Path(__file__).resolve().parents[2]

#: A comma before ``name=`` separates two parameters; any other comma belongs to a value.
PARAM_SPLIT = re.compile(r",(?=\s*[A-Za-z_]\w*=)")


def e2e_params(raw: str) -> list[str]:
    """``KFP_GPU_E2E_PARAMS`` -> the ``k=v`` pairs, in order."""
    return [p.strip() for p in PARAM_SPLIT.split(raw) if p.strip()]


def test_e2e_params_split_only_before_a_name():
    assert e2e_params("epochs=2, shards=[1,2,3],gpu=mig:1g.10gb") == [
        "epochs=2", "shards=[1,2,3]", "gpu=mig:1g.10gb"]
    assert e2e_params("") == []


@pytest.mark.e2e
@pytest.mark.skipif(not os.environ.get("KFP_GPU_E2E_HOST"),
                    reason="set KFP_GPU_E2E_HOST (and KFP_TOKEN) to submit to a real KFP")
def test_submit_to_a_real_kfp_succeeds():
    pipeline = os.environ.get("KFP_GPU_E2E_PIPELINE", "imdb-lstm")
    path, _ = compiled_pipeline(pipeline)
    declared = next(yaml.safe_load_all(path.read_text()))["root"].get(
        "inputDefinitions", {}).get("parameters", {})
    pairs = e2e_params(os.environ.get("KFP_GPU_E2E_PARAMS", ""))
    source = os.environ.get("KFP_GPU_E2E_SOURCE", "").strip()
    if source and "source" not in declared:
        pytest.fail(f"KFP_GPU_E2E_SOURCE is set but {pipeline} has no `source` parameter; "
                    "give its inputs in KFP_GPU_E2E_PARAMS", pytrace=False)
    if source:
        pairs.append(f"source={source}")
    if "source" in declared and not any(p.startswith("source=") for p in pairs):
        pytest.fail(f"{pipeline} reads its data from `source` (default "
                    f"{declared['source'].get('defaultValue')!r}, which may need internet): set "
                    "KFP_GPU_E2E_SOURCE to a URI the cluster can read, e.g. "
                    "gs://BUCKET/imdb/imdb_50k.csv.gz", pytrace=False)
    app = typer.Typer()
    app.command()(submit_cli.submit_command)
    args = [pipeline, "--host", os.environ["KFP_GPU_E2E_HOST"], "--experiment", "kfp-gpu-e2e",
            *(["--namespace", os.environ["KFP_GPU_E2E_NAMESPACE"]]
              if os.environ.get("KFP_GPU_E2E_NAMESPACE") else []),
            *[arg for p in pairs for arg in ("--param", p)],
            "--wait", "--timeout", os.environ.get("KFP_GPU_E2E_TIMEOUT", "3600"),
            "--poll", os.environ.get("KFP_GPU_E2E_POLL", "15")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


def test_the_opt_in_test_authenticates_with_the_callers_kfp_token(tmp_path):
    """Not opt-in: the opt-in test run as a user runs it (``KFP_GPU_E2E_HOST=...
    KFP_TOKEN=... pytest -m e2e``) against the KFP API double that answers 401 without
    that token: it passes, and the double holds its one run. (Under test_submit.py's
    ``kfp_client_env`` it could not: that fixture clears ``KFP_TOKEN``.)"""
    with FakeKfp(tokens={"e2e-s3cret"}) as kfp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("KFP_GPU_E2E_") and k not in ("KFP_TOKEN", "KFP_HOST")}
        env.update(HOME=str(tmp_path), KFP_TOKEN="e2e-s3cret", KFP_GPU_E2E_HOST=kfp.url,
                   KFP_GPU_E2E_SOURCE="s3://bucket/imdb/imdb_50k.csv.gz",
                   KFP_GPU_E2E_POLL="0.05", KFP_GPU_E2E_TIMEOUT="60")
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "e2e",
             f"{Path(__file__).relative_to(REPO)}::test_submit_to_a_real_kfp_succeeds"],
            check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
        assert len(kfp.runs) == 1
