"""What every request kind answers, with the defaults of a kind that asks for nothing.

A kind module subclasses :class:`Kind` and overrides what differs. Kinds read the fields of
a :class:`kfp_gpu.gpu.request.GpuRequest` (passed as ``r``) and return plain values; they
never construct one (``parse`` returns the fields), so this package does not import the
request module.
"""

from __future__ import annotations

import re
from typing import Any

from kfp_gpu.gpu.names import KIND_ENV, MEMORY_ENV, SHARE_ENV

_INT = re.compile(r"^\d+$")

#: The accepted text forms, appended to every parse error.
ACCEPTED = ("accepted: 'none', 'gpu:N[,product=P]', 'mig:PROFILE[,model=M][,unchecked=true]', "
            "'shared:N[,replicas=R][,strategy=time-slicing|mps][,renamed=true]', "
            "'fraction:F' (0<F<1), 'gpu-memory:MiB', "
            "'metagpu:UNITS' (integer 1..100, 100 = 1 GPU), 'hami:N[,mem=MiB][,cores=1..100]', "
            "'dra:gpu=N|mig=PROFILE[,product=P][,memory>=QTY][,sharing=time-slicing|mps...]' "
            "(DRA, alpha upstream); every form takes [,queue=Q][,queue-label=K]")


def num(x: float) -> str:
    """Shortest exact decimal text of a share (1.0 -> '1', 0.25 -> '0.25'); round-trips."""
    return repr(float(x)) if float(x) != int(x) else str(int(x))


def parse_int(kind: str, what: str, text: str, lo: int = 0, hi: int | None = None) -> int:
    """``text`` as an integer in ``lo..hi``.

    Raises:
        ValueError: naming the kind, the field, the range and the accepted forms.
    """
    t = text.strip()
    if not _INT.match(t) or int(t) < lo or (hi is not None and int(t) > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        hint = ""
        if kind in ("gpu", "shared", "hami") and what == "count":
            hint = ("; for part of a GPU use 'fraction:F' (0<F<1), 'gpu-memory:MiB', "
                    "'metagpu:UNITS' or 'mig:PROFILE'")
        raise ValueError(f"{kind}: {what} must be an integer {rng}, got {text!r}{hint}; "
                         f"{ACCEPTED}")
    return int(t)


class Kind:
    """A request kind: how its text parses, what it validates and what it renders to.

    Attributes:
        name: the text form's head (``gpu``, ``mig``, ...).
        options: option keys accepted after the comma.
        count_parameter: a pipeline parameter may give the resource count.
        names_container: the pod must name the container that gets the GPU
            (KAI's ``gpu-fraction-container-name``).
    """

    name = "none"
    options: frozenset[str] = frozenset()
    count_parameter = False
    #: The scheduler gives the request to one named container (KAI fractions).
    names_container = False
    #: ``product=`` is GPU Feature Discovery's node label ``nvidia.com/gpu.product`` (DRA:
    #: a device selector instead).
    product_is_label = True

    def parse(self, value: str, opts: dict[str, str]) -> dict[str, Any]:
        """GpuRequest fields of ``<name>:<value>,<opts>`` (raises ValueError)."""
        return {}

    def validate(self, r) -> None:
        """Raise ValueError naming the accepted values if ``r`` is not a valid request."""

    def normalized(self, r) -> dict[str, Any]:
        """Fields to set to their canonical form after validation (e.g. the MIG profile)."""
        return {}

    def resource(self, r) -> tuple[str, int]:
        """The one extended resource a KFP task gets and its quantity (``("", 0)``: none)."""
        return "", 0

    def task_resource(self, r) -> tuple[str, int]:
        """The one accelerator resource on a KFP task (default: :meth:`resource`)."""
        return self.resource(r)

    def task_warning(self, r, count_parameter: bool = False) -> str:
        """What a KFP task cannot carry of this request ("" = nothing lost)."""
        return ""

    def extra_limits(self, r) -> dict[str, str]:
        """Further resources, for pod templates the suite writes itself (not KFP tasks)."""
        return {}

    def env(self, r) -> dict[str, str]:
        """The container's share variables: ``{KIND_ENV, SHARE_ENV[, MEMORY_ENV]}``
        (:mod:`kfp_gpu.gpu.names`; MEMORY_ENV = ``r.memory_mib`` when set)."""
        out = {KIND_ENV: r.kind, SHARE_ENV: num(self.share(r))}
        if r.memory_mib:
            out[MEMORY_ENV] = str(r.memory_mib)
        return out

    def share(self, r) -> float:
        """GPUs' worth of device memory this request may use on the device(s) it sees."""
        return 0.0

    def physical_share(self, r) -> float:
        """Fraction of physical GPU memory held."""
        return self.share(r)

    def gpus_per_pod(self, r) -> int:
        """Devices each pod sees (MPIJob ``slotsPerWorker``)."""
        return 0

    def node_selector(self, r) -> dict[str, str]:
        """Kind-specific node selector (the product selector is common)."""
        return {}

    def annotations(self, r) -> dict[str, str]:
        return {}

    def labels(self, r) -> dict[str, str]:
        return {}

    def text(self, r) -> tuple[str, list[str]]:
        """``(head value, options)`` of the canonical text form."""
        return "", []
