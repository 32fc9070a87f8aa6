"""`kfp-gpu run --local --runner docker` pieces that need no engine."""

from __future__ import annotations

import stat

import pytest

from kfp_gpu.local import docker as local_docker
from kfp_gpu.local import run as local_run
from kfp_gpu.release import images


def test_unknown_runner_is_rejected_with_accepted_values():
    with pytest.raises(ValueError, match="subprocess"):
        local_run.run("imdb-lstm", {}, runner="podman")


def test_missing_outputs_names_absent_artifacts(tmp_path):
    present = tmp_path / "model"
    present.write_text("x")
    outs = {"model": {"uri": str(present), "type": "system.Model"},
            "data": {"uri": str(tmp_path / "gone"), "type": "system.Dataset"},
            "metrics": {"uri": str(tmp_path / "no-file"), "type": "system.Metrics"},
            "accuracy": 0.8}
    assert local_docker.missing_outputs(outs) == ["data"]  # Metrics live in metadata


def test_root_writable_by_image_user_and_local_tags(tmp_path, monkeypatch):
    root = tmp_path / "root"
    local_docker.prepare_root(str(root))
    assert stat.S_IMODE(root.stat().st_mode) == 0o1777
    # The components name the default set (the local tags) whatever the environment says:
    # the registry is a compile argument, never an environment read.
    monkeypatch.setenv("KFP_GPU_REGISTRY", "registry.example.com/team")
    from kfp_gpu.components.prep_text.component import prep_text

    assert prep_text.component_spec.implementation.container.image == \
        images.ImageSet().image(images.TRAINER)
    assert images.ImageSet().image(images.TRAINER).startswith(images.DEFAULT_REGISTRY + "/")


def test_docker_runner_binds_data_read_only(tmp_path):
    pytest.importorskip("docker")
    r = local_docker.runner(str(tmp_path))
    (mount,) = r.container_run_args["mounts"]
    assert mount["Source"] == str(tmp_path) and mount["ReadOnly"] is True
    assert r.container_run_args["user"] == "1000"


def test_html_outputs_are_linked_generically(tmp_path):
    page = tmp_path / "page"
    page.write_text("<!DOCTYPE html><html><body>ok</body></html>")
    other = tmp_path / "metrics"
    other.write_text("{}")
    outs = {"summary_page": {"uri": str(page)}, "metrics": {"uri": str(other)}}
    local_run._link_html_reports(outs, tmp_path / "logs")
    assert (tmp_path / "logs" / "summary_page.html").read_text().startswith("<!DOCTYPE")
    assert outs["summary_page"]["html"].endswith("summary_page.html")
    assert "html" not in outs["metrics"]
