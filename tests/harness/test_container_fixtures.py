"""The container tests' skip-or-fail rule and helpers, without a Docker engine."""

from __future__ import annotations

import pytest

from tests.containers import conftest as containers
from tests.containers.engine import ContainerResult, image_ref, module_path


@pytest.mark.parametrize("ci", ["true", "1"])
def test_missing_engine_fails_under_ci(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="no engine .*CI=true"):
        containers.unavailable("no engine")


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_missing_engine_skips_elsewhere(monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="no engine"):
        containers.unavailable("no engine")


def test_image_ref_is_the_compiled_reference(monkeypatch):
    # the checked-in YAML's reference (default ImageSet); no environment moves it
    monkeypatch.setenv("KFP_GPU_REGISTRY", "registry.example.com/ml/")
    assert image_ref("horovod").startswith("ghcr.io/kfp-gpu/kfp-gpu-horovod:")
    with pytest.raises(ValueError, match="accepted"):
        image_ref("pytorch")


def test_container_result_check():
    assert ContainerResult(0, "ok\n").check() == "ok\n"
    with pytest.raises(AssertionError, match="exit code 3:\nboom"):
        ContainerResult(3, "boom").check()


def test_module_path_finds_entry_points():
    assert module_path("launcher.py").startswith("kfp_gpu.")
    assert module_path("launcher.py").endswith(".launcher")
    with pytest.raises(LookupError):
        module_path("no_such_module.py")
