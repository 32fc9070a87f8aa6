"""``dra:gpu=N,class=DEVICECLASS``: a DRA request for another driver's DeviceClass.

The example class is the reference driver's: kubernetes-sigs/dra-example-driver @v0.2.1
publishes DeviceClass ``gpu.example.com`` (deployments/helm/dra-example-driver/templates/
deviceclass.yaml, CEL ``device.driver == 'gpu.example.com'``). The NVIDIA-only options
(``mig=``, ``product=``, ``memory>=``, ``model=``, ``sharing=``...) are refused with it.
"""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from kfp_gpu import gpu
from kfp_gpu.gpu import claim
from kfp_gpu.gpu.kinds.dra import DRA_ACCEPTED

K8S = "1.36.0"
EXAMPLE = "gpu.example.com"


def test_class_parses_and_the_claim_names_that_device_class():
    r = gpu.parse(f"dra:gpu=2,class={EXAMPLE}")
    assert (r.kind, r.count, r.device_class) == ("dra", 2, EXAMPLE)
    t = claim.template(r, "job-gpu", "ml")
    kubernetes_validate.validate(t, K8S, strict=True)
    (req,) = t["spec"]["spec"]["devices"]["requests"]
    assert req == {"name": "gpu", "exactly": {"deviceClassName": EXAMPLE,
                                              "allocationMode": "ExactCount", "count": 2}}
    assert "config" not in t["spec"]["spec"]["devices"]  # no NVIDIA opaque config
    assert claim.selectors(r) == []  # no CEL on gpu.nvidia.com attributes
    assert r.gpus_per_pod == 2 and r.share == 2.0
    assert r.pod_fragment()["resources"] == {"limits": {}, "requests": {}}


@pytest.mark.parametrize("opts, named", [
    ("product=H100", "product="),
    ("memory>=80Gi", "memory>="),
    ("sharing=time-slicing", "sharing="),
    ("sharing=time-slicing,interval=Long", "sharing=, interval="),
    ("sharing=mps,threads=50,pinned=10Gi", "sharing=, threads=, pinned="),
    ("model=H100-80GB", "model="),
])
def test_nvidia_only_options_are_refused_with_another_class(opts, named):
    with pytest.raises(ValueError) as e:
        gpu.parse(f"dra:gpu=1,class={EXAMPLE},{opts}")
    msg = str(e.value)
    assert msg.startswith(f"dra: {named} with class={EXAMPLE}: ")
    assert "NVIDIA DRA driver attributes" in msg and DRA_ACCEPTED in msg
    assert "[,class=DEVICECLASS]" in msg and "\n" not in msg


def test_a_mig_device_is_refused_with_another_class():
    with pytest.raises(ValueError, match=r"^dra: mig= with class=gpu\.example\.com: .*NVIDIA"):
        gpu.parse(f"dra:mig=1g.10gb,class={EXAMPLE}")


@pytest.mark.parametrize("name", [
    "GPU.example.com",          # upper case
    "gpu_example.com",          # underscore
    "-gpu.example.com",         # starts with '-'
    "gpu.example.com.",         # ends with '.'
    "gpu..example.com",         # empty label
    "gpu example",              # space
    "a" * 254,                  # over 253 characters
])
def test_invalid_class_names_are_refused(name):
    with pytest.raises(ValueError) as e:
        gpu.parse(f"dra:gpu=1,class={name}")
    msg = str(e.value)
    assert "class must be a DeviceClass name (a Kubernetes object name" in msg
    assert DRA_ACCEPTED in msg


def test_empty_class_is_no_class():
    r = gpu.parse("dra:gpu=1,class=")
    assert r.device_class == "" and claim.device_class(r) == "gpu.nvidia.com"


def test_a_253_character_name_is_accepted():
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert len(name) == 253
    assert claim.claim_spec(gpu.parse(f"dra:gpu=1,class={name}"))[
        "devices"]["requests"][0]["exactly"]["deviceClassName"] == name


@pytest.mark.parametrize("text", [
    f"dra:gpu=1,class={EXAMPLE}",
    f"dra:gpu=4,class={EXAMPLE},queue=team-a",
    "dra:gpu=1,class=example-gpus",
])
def test_the_text_form_round_trips_with_class(text):
    r = gpu.parse(text)
    assert r.to_text() == text
    assert gpu.parse(r.to_text()) == r
    assert "class=" in str(r)


def test_class_changes_the_request_and_its_kfp_template_name():
    from kfp_gpu.gpu import render

    plain, other = gpu.parse("dra:gpu=1"), gpu.parse(f"dra:gpu=1,class={EXAMPLE}")
    assert plain != other
    assert render.task_template_name(plain) != render.task_template_name(other)


@pytest.mark.parametrize("text, canonical, device_class", [
    ("dra:gpu=1,class=gpu.nvidia.com", "dra:gpu=1", "gpu.nvidia.com"),
    ("dra:gpu=1,class=gpu.nvidia.com,product=H100,memory>=79Gi,sharing=mps,threads=50",
     "dra:gpu=1,product=H100,memory>=79Gi,sharing=mps,threads=50", "gpu.nvidia.com"),
    ("dra:mig=1g.10gb,class=gpu.nvidia.com,sharing=mps", "dra:mig=1g.10gb,sharing=mps",
     "mig.nvidia.com"),
    ("dra:mig=1g.10gb,class=mig.nvidia.com", "dra:mig=1g.10gb", "mig.nvidia.com"),
])
def test_nvidias_class_is_the_same_as_no_class(text, canonical, device_class):
    r = gpu.parse(text)
    assert r == gpu.parse(canonical) and r.to_text() == canonical
    assert r.device_class == ""
    assert claim.claim_spec(r) == claim.claim_spec(gpu.parse(canonical))
    assert claim.claim_spec(r)["devices"]["requests"][0]["exactly"][
        "deviceClassName"] == device_class


def test_nvidias_mig_class_needs_a_mig_device():
    with pytest.raises(ValueError, match="ask for a MIG device with 'dra:mig=PROFILE'"):
        gpu.parse("dra:gpu=1,class=mig.nvidia.com")


@pytest.mark.parametrize("text, device_class", [
    ("dra:gpu=2", "gpu.nvidia.com"),
    ("dra:mig=1g.10gb", "mig.nvidia.com"),
    ("dra:gpu=1,product=H100,memory>=80Gi,sharing=time-slicing,interval=Long",
     "gpu.nvidia.com"),
])
def test_without_class_nothing_changes(text, device_class):
    r = gpu.parse(text)
    assert r.device_class == "" and "class=" not in r.to_text()
    assert claim.claim_spec(r)["devices"]["requests"][0]["exactly"][
        "deviceClassName"] == device_class


def test_class_is_only_for_dra_requests():
    with pytest.raises(ValueError, match="options accepted for 'gpu'|options accepted for gpu"):
        gpu.parse(f"gpu:1,class={EXAMPLE}")
    with pytest.raises(ValueError, match="class=\\) is for 'dra' requests, not 'gpu'"):
        gpu.GpuRequest(kind="gpu", count=1, device_class=EXAMPLE)


def test_doctor_checks_the_requests_device_class(tmp_path, rbac_objects):
    from tests.doubles.k8s_cluster import FakeCluster
    from tests.support.doctor_double import dra_nodes, run

    with FakeCluster(rbac_objects=rbac_objects, nodes=dra_nodes(),
                     dra={"deviceclasses": [], "resourceslices": []}) as c:
        res = run(c, tmp_path, "--gpu", f"dra:gpu=1,class={EXAMPLE}")
    assert res.exit_code == 1
    assert re.search(rf"DeviceClass {re.escape(EXAMPLE)} +missing", res.output)
    assert f"DeviceClass {EXAMPLE} is missing: install the DRA driver that provides it" \
        in res.output
    assert "DeviceClass gpu.nvidia.com is missing" not in res.output
    assert "no node publishes ResourceSlices of gpu.nvidia.com" not in res.output
