"""kfp_gpu/gpu/mig_profiles.json: shape, known MIG facts, and a deterministic generator.

The JSON is written by scripts/gen_mig_tables.py from NVIDIA mig-parted's
deployments/systemd/config-default.yaml (not vendored; the fixture below is a hand-written
excerpt in the same format). Known facts: NVIDIA MIG User Guide, "Supported MIG Profiles".
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "kfp_gpu" / "gpu" / "mig_profiles.json"
SCRIPT = ROOT / "scripts" / "gen_mig_tables.py"
NAME = re.compile(r"^\d+g\.\d+gb(\+me\.all|\+me|-me|\+gfx)?$")

FIXTURE = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  # A100-40GB, A800-40GB
  all-1g.5gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7

  all-1g.5gb.me:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb+me": 1

  # H100-80GB, H800-80GB, A100-80GB, A800-80GB, A100-40GB, A800-40GB
  all-1g.10gb:
    # H100-80GB, H800-80GB, A100-80GB, A800-80GB
    - device-filter: ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    # A100-40GB, A800-40GB
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 4

  all-7g.80gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.80gb": 1

  all-balanced:
    - device-filter: ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 2
        "2g.10gb": 1
        "3g.20gb": 1
"""


def _gen():
    spec = importlib.util.spec_from_file_location("gen_mig_tables", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def table() -> dict:
    return json.loads(TABLE.read_text())


def profiles(table, model) -> dict:
    return {p["name"]: p for p in table["models"][model]["profiles"]}


def test_shape_and_memory_bounds(table):
    assert table["source"]["mig_parted"].startswith("NVIDIA/mig-parted@")
    assert table["models"], "no models"
    for model, m in table["models"].items():
        assert m["compute_slices"] in (4, 7) and m["memory_slices"] in (4, 8), model
        assert m["profiles"], model
        for p in m["profiles"]:
            assert NAME.match(p["name"]), p
            assert p["base"] == p["name"].split("+")[0].split("-")[0]
            assert 1 <= p["compute_slices"] <= m["compute_slices"], (model, p)
            assert 0 < p["memory_gb"] <= m["memory_gb"], (model, p)
            assert 1 <= p["max_instances"] <= m["compute_slices"], (model, p)
            assert p["resource"] == "nvidia.com/mig-" + p["name"].replace("+", ".")
            assert "+" not in p["resource"]


@pytest.mark.parametrize("model,name,count", [
    ("A100-40GB", "1g.5gb", 7), ("A100-40GB", "1g.5gb+me", 1), ("A100-40GB", "1g.10gb", 4),
    ("A100-40GB", "7g.40gb", 1), ("A100-80GB", "1g.10gb", 7), ("H100-80GB", "1g.10gb", 7),
    ("H100-80GB", "7g.80gb", 1), ("H100-80GB", "3g.40gb", 2), ("A30-24GB", "1g.6gb", 4),
    ("A30-24GB", "4g.24gb", 1), ("H200-141GB", "1g.18gb", 7), ("H200-141GB", "7g.141gb", 1),
    ("H100-NVL-94GB", "7g.94gb", 1), ("H20-96GB", "1g.12gb", 7), ("GH200-144GB", "1g.18gb", 7),
    ("B200-180GB", "7g.180gb", 1), ("GB200-186GB", "7g.186gb", 1),
    ("RTX-PRO-6000-96GB", "1g.24gb+gfx", 4), ("RTX-PRO-6000-96GB", "2g.48gb-me", 2),
    ("RTX-PRO-6000-96GB", "1g.24gb+me.all", 1), ("H800-80GB", "4g.40gb", 1),
    ("H200-NVL-141GB", "3g.71gb", 2),
])
def test_known_profiles(table, model, name, count):
    assert profiles(table, model)[name]["max_instances"] == count


def test_forms_only_where_they_exist(table):
    # +gfx / +me.all / -me are RTX PRO Blackwell forms; A100 has no 1g.5gb+gfx, and no model
    # has a ".shared" profile (that is the device plugin's time-slicing rename, not MIG).
    for model, m in table["models"].items():
        for p in m["profiles"]:
            if p["suffix"] in ("+gfx", "+me.all", "-me"):
                assert model == "RTX-PRO-6000-96GB", (model, p["name"])
            assert ".shared" not in p["name"]
    assert "1g.10gb" not in profiles(table, "A30-24GB")
    assert "2g.10gb" not in profiles(table, "A100-80GB")  # 2g with one memory slice


def test_generator_is_deterministic_and_reads_the_config(tmp_path):
    cfg = tmp_path / "config-default.yaml"
    cfg.write_text(FIXTURE)
    outs = []
    for i in range(2):
        out = tmp_path / f"out{i}.json"
        subprocess.run([sys.executable, str(SCRIPT), str(cfg), "--source-ref",
                        "NVIDIA/mig-parted@fixture", "--supplement", str(tmp_path / "none.json"),
                        "-o", str(out)], check=True, capture_output=True, text=True)
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    a40 = {p["name"]: p["max_instances"] for p in doc["models"]["A100-40GB"]["profiles"]}
    assert a40 == {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4}
    h100 = {p["name"]: p["max_instances"] for p in doc["models"]["H100-80GB"]["profiles"]}
    assert h100 == {"1g.10gb": 7, "7g.80gb": 1}
    assert "H200-141GB" not in doc["models"]  # nothing in the fixture for it


def test_supplement_rows_are_added_with_their_source():
    gen = _gen()
    row = {"model": "H100-80GB", "name": "1g.20gb", "max_instances": 4,
           "source_url": "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
                         "supported-mig-profiles.html",
           "source_text": "For A100-SXM4-80GB ... 1g.20gb"}
    doc = gen.build(FIXTURE, [row], "NVIDIA/mig-parted@fixture")
    p = {q["name"]: q for q in doc["models"]["H100-80GB"]["profiles"]}["1g.20gb"]
    assert p["max_instances"] == 4 and p["memory_slices"] == 2
    assert p["source"].startswith("https://docs.nvidia.com/")


def test_checked_in_table_is_in_the_generators_canonical_form():
    """The checked-in JSON is byte-identical to the generator's serialisation of itself (sorted
    keys, indent 1, trailing newline): hand edits that reorder or reformat it fail here.
    Regenerate with the command in scripts/gen_mig_tables.py's docstring."""
    gen = _gen()
    doc = json.loads(TABLE.read_text())
    assert gen.dumps(doc) == TABLE.read_text()


def test_loader_reads_the_json_and_accepts_every_form(table):
    """kfp_gpu.gpu.mig is loaded from mig_profiles.json (one source), with the +/. spellings,
    the .shared renamed resource and the unchecked escape hatch."""
    import warnings

    from kfp_gpu import gpu
    from kfp_gpu.gpu import mig

    assert mig.models() == list(table["models"])
    for model in table["models"]:
        assert list(mig.profiles(model)) == list(profiles(table, model))
    cases = {
        "mig:1g.10gb.me,model=H100-80GB": ("mig:1g.10gb+me,model=H100-80GB",
                                           "nvidia.com/mig-1g.10gb.me"),
        "mig:1g.24gb+me.all,model=RTX-PRO-6000-96GB": (
            "mig:1g.24gb+me.all,model=RTX-PRO-6000-96GB", "nvidia.com/mig-1g.24gb.me.all"),
        "mig:2g.48gb-me,model=rtx-pro-6000-96gb": ("mig:2g.48gb-me,model=RTX-PRO-6000-96GB",
                                                   "nvidia.com/mig-2g.48gb-me"),
        "mig:4g.96gb.gfx": ("mig:4g.96gb+gfx", "nvidia.com/mig-4g.96gb.gfx"),
        "mig:1g.10gb.shared,model=H100-80GB": ("mig:1g.10gb.shared,model=H100-80GB",
                                               "nvidia.com/mig-1g.10gb.shared"),
        "mig:3g.47gb,model=H100-NVL-94GB": ("mig:3g.47gb,model=H100-NVL-94GB",
                                            "nvidia.com/mig-3g.47gb"),
        "mig:1g.10gb,model=A800-80GB": ("mig:1g.10gb,model=A100-80GB",
                                        "nvidia.com/mig-1g.10gb"),
    }
    for text, (canonical, resource) in cases.items():
        r = gpu.parse(text)
        assert (r.to_text(), r.resource_name) == (canonical, resource), text
        assert gpu.parse(r.to_text()) == r
    assert gpu.parse("mig:2g.48gb,model=RTX-PRO-6000-96GB").physical_share == 0.5
    with pytest.raises(ValueError, match="unchecked=true"):
        gpu.parse("mig:1g.24gb+gfx,model=H100-80GB")  # +gfx exists on RTX PRO only
    with pytest.warns(UserWarning, match="not checked"):
        r = gpu.parse("mig:2g.99gb+me,unchecked=true")
    assert (r.resource_name, r.physical_share) == ("nvidia.com/mig-2g.99gb.me", 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="form"):
            gpu.parse("mig:big,unchecked=true")
    assert mig.normalize_model("h200") == "H200-141GB"
    with pytest.raises(ValueError, match="accepted"):
        mig.normalize_model("H100")  # 80, 96 or NVL-94
