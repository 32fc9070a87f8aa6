"""Generate kfp_gpu/gpu/mig_profiles.json (MIG profiles per GPU model) from NVIDIA mig-parted.

Input: NVIDIA mig-parted's published default config, ``deployments/systemd/config-default.yaml``
in github.com/NVIDIA/mig-parted (the same file the GPU Operator ships as its default
``default-mig-parted-config``). It is NOT vendored here: pass the path of a fetched copy.

    git clone https://github.com/NVIDIA/mig-parted /tmp/mig-parted
    python scripts/gen_mig_tables.py /tmp/mig-parted/deployments/systemd/config-default.yaml \
        --source-ref "NVIDIA/mig-parted@$(git -C /tmp/mig-parted rev-parse HEAD)" \
        -o kfp_gpu/gpu/mig_profiles.json

How the config is read (it lists MIG layouts, not per-model tables):
- every ``all-<profile>`` layout gives a profile and how many instances of it fit on one GPU
  (``mig-devices: {"1g.10gb": 7}``), either for the GPUs of a ``device-filter`` (PCI device
  IDs) or, without a filter, for every GPU whose MIG geometry has that profile;
- ``all-balanced`` gives, per device-ID group, the 1g/2g/3g memory sizes, which fix each
  model's memory-slice sizes; with the model's full memory (below) a profile ``<g>g.<M>gb``
  belongs to a model when M is one of its slice sizes and g fits that many memory slices;
- the YAML comment above a layout names the GPUs it is meant for (upstream's own
  annotation, not always complete); it is read only to allow ``+me`` on a 1g profile with two
  memory slices (e.g. ``1g.24gb+me`` on H100 NVL), which the geometry alone does not decide.
  Models that share device IDs in the config (A100/H100/H800 80GB; H100-96GB/GH200/H20)
  cannot be told apart by it and share one table.
MODELS below (device-ID groups, full memory, compute/memory slice counts) is hand-kept from
the same file's ``all-balanced`` comments and the full-GPU profiles (``7g.<M>gb``/``4g.<M>gb``).
Profiles the config lacks can be added from NVIDIA's MIG User Guide ("Supported MIG Profiles",
https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html) in
``scripts/mig_supplement.json``: rows ``{"model", "name", "max_instances", "source_url",
"source_text"}`` (the quoted table text next to each row); config rows win over it.

Profile suffixes (MIG User Guide; mig-parted pkg/mig/builder/builder.go): ``+me`` adds the
media engines (one instance per GPU); ``+me.all`` takes all media engines, ``-me`` excludes
them and ``+gfx`` adds graphics APIs -- the last three only on RTX PRO Blackwell GPUs.
The Kubernetes resource (k8s-device-plugin internal/rm/rm.go, migStrategy mixed) is
``nvidia.com/mig-<profile>`` with ``+`` turned into ``.``. ``.shared`` is NOT a MIG profile
suffix: it is the device plugin's renamed time-sliced resource (api/config/v1/consts.go
``DefaultSharedResourceNameSuffix``), e.g. ``nvidia.com/mig-1g.10gb.shared``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import yaml

SEVEN = (7, 8)   # compute slices, memory slices
FOUR = (4, 4)
GRAPHICS_SUFFIXES = ("+gfx", "+me.all", "-me")
#: (key, comment names, PCI device IDs, full memory GB, (compute, memory) slices).
MODELS = [
    ("A30-24GB", ["A30-24GB"], ["0x20B710DE"], 24, FOUR),
    ("A100-40GB", ["A100-40GB", "A800-40GB"],
     ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"], 40, SEVEN),
    ("A100-80GB", ["A100-80GB", "A800-80GB"], ["0x233010DE", "0x233110DE", "0x232210DE",
     "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"], 80, SEVEN),
    ("H100-80GB", ["H100-80GB"], ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE",
     "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"], 80, SEVEN),
    ("H800-80GB", ["H800-80GB"], ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE",
     "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"], 80, SEVEN),
    ("H100-NVL-94GB", ["H100 NVL", "H800 NVL"], ["0x232110DE", "0x233A10DE"], 94, SEVEN),
    ("H100-96GB", ["H100-96GB", "PG506-96GB"],
     ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"], 96, SEVEN),
    ("GH200-96GB", ["GH200"], ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"],
     96, SEVEN),
    ("H20-96GB", ["H20"], ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"], 96, SEVEN),
    ("H200-141GB", ["H200-141GB", "H200 141GB"], ["0x233510DE"], 141, SEVEN),
    ("H200-NVL-141GB", ["H200 NVL"], ["0x233B10DE"], 141, SEVEN),
    ("GH200-144GB", ["GH200 144G HBM3e"], ["0x234810DE"], 144, SEVEN),
    ("B200-180GB", ["B200"], ["0x290110DE"], 180, SEVEN),
    ("GB200-186GB", ["GB200 HGX", "GB200"], ["0x294110DE"], 186, SEVEN),
    ("B300-269GB", ["B300"], ["0x318210DE"], 269, SEVEN),
    ("GB300-278GB", ["GB300"], ["0x31C210DE"], 278, SEVEN),
    ("RTX-PRO-6000-96GB", ["RTX PRO 6000 Blackwell"], ["0x2BB510DE"], 96, FOUR),
]
#: Memory slices a g-compute-slice instance may hold, per (compute, memory) geometry.
ALLOWED = {SEVEN: {1: {1, 2}, 2: {2}, 3: {4}, 4: {4}, 7: {8}},
           FOUR: {1: {1}, 2: {2}, 4: {4}}}
PROFILE = re.compile(r"^(\d+)g\.(\d+)gb(\+me\.all|\+me|-me|\+gfx)?$")
_SKIP = ("all-disabled", "all-enabled", "all-balanced")


def comment_scopes(text: str) -> dict[str, list[str]]:
    """Layout name -> GPU names in the nearest top-level comment above it (sticky)."""
    scopes, current = {}, []
    for line in text.splitlines():
        if line.startswith("  #"):
            current = [n.strip() for n in line[3:].split(",") if n.strip()]
        elif re.match(r"^  [A-Za-z0-9].*:\s*$", line):
            scopes[line.strip()[:-1]] = current
    return scopes


def _filter_ids(item: dict) -> set[str] | None:
    f = item.get("device-filter")
    if f is None:
        return None
    return {x.upper().replace("0X", "0x") for x in ([f] if isinstance(f, str) else f)}


def slice_sizes(configs: dict) -> dict[str, dict[int, int]]:
    """Model key -> {memory GB: memory slices} from all-balanced plus the full memory."""
    out = {}
    for key, _, ids, full, geo in MODELS:
        sizes = {full: geo[1]}
        for item in configs.get("all-balanced", []):
            if (_filter_ids(item) or set()) & set(ids):
                for prof in item.get("mig-devices", {}):
                    g, mem = PROFILE.match(prof).group(1, 2)
                    sizes.setdefault(int(mem), {1: 1, 2: 2, 3: 4}[int(g)])
        out[key] = sizes
    return out


def _fits(model, geo, sizes, g, mem, suffix, named) -> bool:
    """Whether profile g/mem/suffix exists on the model's geometry (see the module doc)."""
    s = sizes.get(mem)
    if s is None or s not in ALLOWED[geo].get(g, set()):
        return False
    graphics = model == "RTX-PRO-6000-96GB"
    if suffix in GRAPHICS_SUFFIXES:
        return graphics
    if suffix == "+me":  # one 1g(+1 memory slice) instance may take the media engines;
        return not graphics and (s == 1 or named)  # wider ones only where upstream says so
    return True


def attribute(configs: dict, scopes: dict) -> tuple[dict, list]:
    """(model -> profile -> (max_instances, layout)), unattributed profile names."""
    sizes = slice_sizes(configs)
    found: dict[str, dict[str, tuple[int, str, bool]]] = {m[0]: {} for m in MODELS}
    unattributed = []
    group_names: dict[tuple, set] = {}
    for _, names, mids, _, _ in MODELS:  # models sharing device IDs share a table
        group_names.setdefault(tuple(mids), set()).update(names)
    for layout in sorted(configs):
        if layout in _SKIP or not layout.startswith("all-"):
            continue
        scope = set(scopes.get(layout, []))
        for item in configs[layout]:
            ids = _filter_ids(item)
            for prof, count in sorted((item.get("mig-devices") or {}).items()):
                m = PROFILE.match(prof)
                if not m:
                    raise ValueError(f"{layout}: unrecognised MIG profile {prof!r}")
                g, mem, suffix = int(m.group(1)), int(m.group(2)), m.group(3) or ""
                hits = []
                for key, _, mids, _, geo in MODELS:
                    if ids is not None and not ids & set(mids):
                        continue
                    named = ids is not None or bool(scope & group_names[tuple(mids)])
                    if _fits(key, geo, sizes[key], g, mem, suffix, named):
                        hits.append(key)
                if not hits:
                    unattributed.append(prof)
                for key in hits:
                    old = found[key].get(prof)
                    if old and old[2] and ids is None:
                        continue  # a device-filtered layout wins over an unfiltered one
                    found[key][prof] = (int(count), layout, ids is not None)
    return found, sorted(set(unattributed))


def _row(prof: str, count: int, sizes: dict, source: str) -> dict:
    g, mem, suffix = PROFILE.match(prof).groups()
    return {"name": prof, "base": f"{g}g.{mem}gb", "suffix": suffix or "",
            "compute_slices": int(g), "memory_gb": int(mem),
            "memory_slices": sizes[int(mem)], "max_instances": count,
            "resource": "nvidia.com/mig-" + prof.replace("+", "."), "source": source}


def build(config_text: str, supplement: list[dict], source_ref: str) -> dict:
    """The JSON document (pure): see the module docstring."""
    configs = yaml.safe_load(config_text)["mig-configs"]
    found, unattributed = attribute(configs, comment_scopes(config_text))
    sizes = slice_sizes(configs)
    models = {}
    for key, names, ids, full, geo in MODELS:
        rows = {p: _row(p, c, sizes[key], f"mig-parted {layout}")
                for p, (c, layout, _) in found[key].items()}
        for sup in supplement:
            if sup["model"] == key and sup["name"] not in rows:
                g, mem = PROFILE.match(sup["name"]).group(1, 2)
                sizes[key].setdefault(int(mem), {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}[int(g)])
                rows[sup["name"]] = _row(sup["name"], int(sup["max_instances"]), sizes[key],
                                         f"{sup['source_url']} :: {sup['source_text']}")
        if not rows:
            continue
        models[key] = {
            "memory_gb": full, "compute_slices": geo[0], "memory_slices": geo[1],
            "device_ids": sorted(ids), "config_names": names,
            "profiles": sorted(rows.values(), key=lambda r: (
                r["compute_slices"], r["memory_gb"], r["suffix"])),
        }
    return {"source": {"mig_parted": source_ref,
                       "file": "deployments/systemd/config-default.yaml",
                       "generator": "scripts/gen_mig_tables.py"},
            "models": models, "unattributed": unattributed}


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", type=Path, help="mig-parted deployments/systemd/config-default.yaml")
    ap.add_argument("--source-ref", required=True, help='e.g. "NVIDIA/mig-parted@<commit>"')
    ap.add_argument("--supplement", type=Path,
                    default=Path(__file__).with_name("mig_supplement.json"))
    ap.add_argument("-o", "--output", type=Path,
                    default=Path(__file__).resolve().parents[1] / "kfp_gpu/gpu/mig_profiles.json")
    args = ap.parse_args(argv)
    sup = json.loads(args.supplement.read_text())["rows"] if args.supplement.exists() else []
    text = dumps(build(args.config.read_text(), sup, args.source_ref))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.output.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
