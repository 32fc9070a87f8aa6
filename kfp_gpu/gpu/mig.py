"""MIG (Multi-Instance GPU) profiles per GPU model, and their Kubernetes resource names.

Source: NVIDIA MIG User Guide, "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html), the
profile tables for A30-24GB, A100-SXM4-40GB, A100-SXM4-80GB, H100-80GB and H200-141GB, and
NVIDIA mig-parted's default ``config.yaml`` (the ``all-<profile>`` entries per GPU).

A profile ``<g>g.<mem>gb`` names ``g`` of the GPU's 7 compute slices (4 on A30) and the
slice's memory in GB; ``+me`` profiles add the media engines (at most one per GPU).

Resource names (NVIDIA k8s-device-plugin, ``migStrategy: mixed``): every profile is its own
extended resource ``nvidia.com/mig-<profile>``, with the profile's ``+`` turned into ``.``
(``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``). With ``migStrategy: single`` every slice
is advertised as plain ``nvidia.com/gpu`` instead (use ``gpu:1`` with a product selector
such as ``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`` there).
"""

from __future__ import annotations

from dataclasses import dataclass

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile on one GPU model.

    Attributes:
        name: profile name, e.g. ``"1g.10gb"`` or ``"1g.10gb+me"``.
        compute_slices: compute slices (of ``model_slices``) the instance gets.
        memory_eighths: memory fraction in eighths of the GPU (A30: quarters, stored as
            eighths, i.e. 2, 4, 8).
        max_instances: how many instances of this profile fit on one GPU.
    """

    name: str
    compute_slices: int
    memory_eighths: int
    max_instances: int

    @property
    def memory_gb(self) -> int:
        """The nominal memory in GB taken from the profile name (``1g.10gb`` -> 10)."""
        return int(self.name.split(".")[1].split("gb")[0])

    @property
    def memory_fraction(self) -> float:
        """Fraction of the GPU's memory (0 < f <= 1)."""
        return self.memory_eighths / 8


def _table(rows: list[tuple[str, int, int, int]]) -> dict[str, MigProfile]:
    return {name: MigProfile(name, g, m, n) for name, g, m, n in rows}


def _seven_slice(m1: str, m2: str, m4: str, full: str) -> dict[str, MigProfile]:
    """The 7-compute/8-memory-slice layout shared by A100, H100 and H200 (MIG user guide)."""
    return _table([
        (f"1g.{m1}gb", 1, 1, 7),
        (f"1g.{m1}gb+me", 1, 1, 1),
        (f"1g.{m2}gb", 1, 2, 4),
        (f"2g.{m2}gb", 2, 2, 3),
        (f"3g.{m4}gb", 3, 4, 2),
        (f"4g.{m4}gb", 4, 4, 1),
        (f"7g.{full}gb", 7, 8, 1),
    ])


#: GPU model -> profile name -> MigProfile. Model keys are what ``mig:...,model=KEY`` takes.
PROFILES: dict[str, dict[str, MigProfile]] = {
    "A30-24GB": _table([
        ("1g.6gb", 1, 2, 4), ("1g.6gb+me", 1, 2, 1),
        ("2g.12gb", 2, 4, 2), ("2g.12gb+me", 2, 4, 1),
        ("4g.24gb", 4, 8, 1),
    ]),
    "A100-40GB": _seven_slice("5", "10", "20", "40"),
    "A100-80GB": _seven_slice("10", "20", "40", "80"),
    "H100-80GB": _seven_slice("10", "20", "40", "80"),
    "H200-141GB": _seven_slice("18", "35", "71", "141"),
}

#: Total memory per model in GB (the number in the model key).
MODEL_MEMORY_GB = {m: int(m.split("-")[1].removesuffix("GB")) for m in PROFILES}


def models() -> list[str]:
    """The GPU model keys with a MIG profile table, in table order."""
    return list(PROFILES)


def all_profiles() -> list[str]:
    """Every known profile name (union over models), sorted."""
    return sorted({p for table in PROFILES.values() for p in table})


def normalize_model(model: str) -> str:
    """Map a user-written model (``h100-80gb``, ``H100``) to a table key.

    Raises:
        ValueError: naming the accepted model keys, if nothing matches uniquely.
    """
    m = model.strip().upper().replace("_", "-")
    if m in PROFILES:
        return m
    hits = [k for k in PROFILES if k.startswith(m + "-") or k == m]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"unknown GPU model {model!r} for MIG; accepted: {', '.join(PROFILES)}")


def lookup(profile: str, model: str = "") -> tuple[str, MigProfile]:
    """Validate ``profile`` (against ``model`` when given) and return ``(model, MigProfile)``.

    Without a model the first model in :data:`PROFILES` order that has the profile is used
    (e.g. ``1g.10gb`` -> A100-40GB, where it is a quarter of the memory; give ``model=``
    when the memory fraction matters, as ``GpuRequest.physical_share`` does).

    Raises:
        ValueError: unknown profile, or a profile the model does not support; the message
            lists the accepted profiles (for that model, or all of them).
    """
    p = profile.strip().lower()
    if model:
        key = normalize_model(model)
        table = PROFILES[key]
        if p not in table:
            raise ValueError(
                f"MIG profile {profile!r} is not valid on {key}; accepted: {', '.join(table)}")
        return key, table[p]
    for key, table in PROFILES.items():
        if p in table:
            return key, table[p]
    raise ValueError(f"unknown MIG profile {profile!r}; accepted: {', '.join(all_profiles())} "
                     f"(per model: " + "; ".join(f"{k}: {', '.join(t)}" for k, t in
                                                 PROFILES.items()) + ")")


def resource_name(profile: str) -> str:
    """Extended resource of a profile under ``migStrategy: mixed``: ``nvidia.com/mig-1g.10gb``.

    ``+`` becomes ``.`` (``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``), as the NVIDIA
    k8s-device-plugin advertises it (``+`` is not valid in a resource name).
    """
    return MIG_RESOURCE_PREFIX + profile.strip().lower().replace("+", ".")
