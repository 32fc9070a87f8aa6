"""``kfp-gpu compile --registry R --pin-digests`` against a real registry.

The registry is Debian's ``docker-registry`` (the CNCF distribution registry, 2.8), started
here on a free loopback port (.ci/run installs the package) by the session fixtures
``registry`` and ``pushed`` (tests/conftest.py, :mod:`tests.containers.registry_server`),
which the docs' ``# needs: registry`` blocks share. The locally built CPU images are tagged ``127.0.0.1:<port>/kfp-gpu-<name>:<version>``
and pushed there (the Docker engine treats 127.0.0.0/8 registries as insecure by default),
then:

- the catalog compiled pinned names ``127.0.0.1:<port>/kfp-gpu-<name>@sha256:...`` in every
  executor, in the MPIJob/TrainJob image defaults and in DIR/manifests/trainer, and no
  tag reference is left;
- each digest equals what the registry serves (sha256 of the manifest a GET returns), the
  digest ``docker push`` reported, and the engine's ``RepoDigests``;
- an image that is not there: exit 2 and one line, nothing written;
- a component of the pinned YAML runs under kfp.local's DockerRunner (the ``--runner
  docker`` runner) from the pinned reference, which the engine pulls from the registry by
  digest (the local tag is removed first, so nothing else could resolve it).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import requests
import yaml

import kfp_gpu
from kfp_gpu.release import digests, images
from tests.containers.engine import image_ref
from tests.support.kustomize import render

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]

VERSION = kfp_gpu.__version__


@pytest.fixture(scope="module")
def pinned_dir(registry, pushed, tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from kfp_gpu.cli import app

    out = tmp_path_factory.mktemp("pinned")
    r = CliRunner().invoke(app, ["compile", "--registry", registry, "--pin-digests",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _served_digest(host: str, name: str) -> str:
    """sha256 of the manifest bytes the registry serves for the tag (GET, not HEAD)."""
    resp = requests.get(f"http://{host}/v2/kfp-gpu-{name}/manifests/{VERSION}",
                        headers={"Accept": ", ".join(digests.MANIFEST_TYPES)}, timeout=30)
    resp.raise_for_status()
    return "sha256:" + hashlib.sha256(resp.content).hexdigest()


def test_pinned_yaml_names_the_digests_the_registry_serves(registry, pushed, pinned_dir,
                                                           docker_client):
    files = sorted(pinned_dir.rglob("*.yaml"))
    assert {p.relative_to(pinned_dir).parts[0] for p in files} == {
        "components", "pipelines", "manifests"}
    text = "\n".join(p.read_text() for p in files)
    refs = set(re.findall(rf"{re.escape(registry)}/kfp-gpu-(\w+)@(sha256:[0-9a-f]{{64}})", text))
    named = {n for n, _ in refs}
    assert named == {"trainer", "horovod"}  # no component starts the launcher image
    for name, digest in refs:
        assert digest == pushed[name] == _served_digest(registry, name), name
        repo_digests = docker_client.images.get(image_ref(name)).attrs["RepoDigests"]
        assert f"{registry}/kfp-gpu-{name}@{digest}" in repo_digests
    # nothing by tag, nothing of the default registry
    assert not re.search(r"kfp-gpu-(trainer|horovod|launcher):", text), \
        re.search(r".*kfp-gpu-(trainer|horovod|launcher):.*", text).group(0)
    # (manifests/trainer/kustomization.yaml's comment shows an images: entry for it)
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    assert images.DEFAULT_REGISTRY not in code


def test_pinned_reaches_the_mpijob_image_and_the_trainer_runtime(registry, pushed,
                                                                 pinned_dir):
    horovod = f"{registry}/kfp-gpu-horovod@{pushed['horovod']}"
    comp = yaml.safe_load(
        (pinned_dir / "components" / "train_resnet_horovod" / "component.yaml").read_text())
    params = comp["root"]["inputDefinitions"]["parameters"]
    assert params["image"]["defaultValue"] == params["runtime_image"]["defaultValue"] == horovod
    pipeline = (pinned_dir / "pipelines" / "resnet_horovod.yaml").read_text()
    assert horovod in pipeline
    for runtime in ("trainer", "trainer-dra"):  # rendered as the release workflow renders them
        rendered = render(pinned_dir / "manifests" / runtime)
        images_in = re.findall(r"image: (\S+)", rendered)
        assert images_in and set(images_in) == {horovod}, runtime


def test_missing_image_exits_2_in_one_line(registry, pushed, tmp_path):
    from typer.testing import CliRunner

    from kfp_gpu.cli import app

    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["compile", "--registry", f"{registry}/elsewhere",
                                 "--pin-digests", "--only", "prep_text", "-o", str(out)])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert "\n" not in line and "elsewhere/kfp-gpu-trainer" in line and "not found" in line
    assert not out.exists()


def test_component_runs_from_the_pinned_reference(registry, pushed, pinned_dir,
                                                  docker_client, shared_data, tmp_path,
                                                  capfd):
    """prep_text of the pinned YAML under the docker runner: the engine pulls
    ``<registry>/kfp-gpu-trainer@sha256:...`` from the registry and the task succeeds."""
    from kfp import components, local

    from kfp_gpu.local import docker as local_docker

    pinned = f"{registry}/kfp-gpu-trainer@{pushed['trainer']}"
    spec = pinned_dir / "components" / "prep_text" / "component.yaml"
    assert yaml.safe_load(spec.read_text())["deploymentSpec"]["executors"][
        "exec-prep-text"]["container"]["image"] == pinned
    # Forget the registry's tag and digest locally: only a pull can resolve the reference.
    docker_client.images.remove(f"{registry}/kfp-gpu-trainer:{VERSION}")
    assert not [d for d in docker_client.images.get(image_ref("trainer")).attrs["RepoDigests"]
                if d.startswith(registry)]
    root = str(tmp_path / "root")
    local_docker.prepare_root(root)
    local.init(runner=local_docker.runner(str(shared_data)), pipeline_root=root,
               raise_on_error=True)
    prep = components.load_component_from_file(str(spec))
    task = prep(source=str(shared_data / "imdb" / "imdb_50k.csv.gz"), max_rows_per_split=200)
    logs = capfd.readouterr().out
    assert f"Pulling image '{pinned}'" in logs, logs[-3000:]
    for split in ("train_data", "test_data"):  # prep's metadata: rows per split
        assert task.outputs[split].metadata["rows"] == 200, task.outputs[split].metadata
        assert Path(task.outputs[split].path).exists()
    assert json.loads(Path(task.outputs["stats"].path).read_text())["vocabulary_size"] > 0
    pulled = docker_client.images.get(pinned)
    assert pulled.id == docker_client.images.get(image_ref("trainer")).id
    docker_client.images.remove(pinned)  # the digest reference the pull made
