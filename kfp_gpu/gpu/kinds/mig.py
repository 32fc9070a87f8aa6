"""``mig:PROFILE``: one MIG slice, ``nvidia.com/mig-<profile>: 1`` (k8s-device-plugin,
``migStrategy: mixed``); the profile is checked against the tables of :mod:`kfp_gpu.gpu.mig`
(for ``model=`` or any model). ``unchecked=true`` skips the tables for a profile they do not
know yet (the name must still follow mig-parted's grammar; the memory fraction is then
unknown, so ``physical_share`` is 1.0 and a warning says so)."""

import warnings

from kfp_gpu.gpu import mig
from kfp_gpu.gpu.kinds.base import Kind
from kfp_gpu.gpu.kinds.whole import product_option


class MigSlice(Kind):
    name = "mig"
    options = frozenset({"model", "product", "unchecked"})

    def parse(self, value, opts):
        unchecked = opts.get("unchecked", "false").lower()
        if unchecked not in ("true", "false"):
            raise ValueError(f"mig: unchecked must be true or false, got {unchecked!r}")
        return {"kind": "mig", "count": 1, "profile": value, "model": opts.get("model", ""),
                "product": opts.get("product", ""), "unchecked": unchecked == "true"}

    def validate(self, r):
        if r.count != 1:
            raise ValueError("mig: exactly one MIG device per container (a CUDA process "
                             "enumerates one MIG instance); use several tasks for more")
        if r.unchecked:
            mig.check_name(r.profile)
            warnings.warn(f"mig:{r.profile} is not checked against the MIG tables "
                          "(unchecked=true): the scheduler only finds it if the nodes "
                          "advertise that resource; its memory fraction is unknown "
                          "(physical_share 1.0)", UserWarning, stacklevel=4)
        else:
            mig.lookup(r.profile, r.model)

    def normalized(self, r) -> dict:
        """Canonical profile (lower case, ``+`` forms) and model key (as in the tables)."""
        if r.unchecked:
            return {"profile": mig.check_name(r.profile),
                    "model": mig.normalize_model(r.model) if r.model else ""}
        model, _ = mig.lookup(r.profile, r.model)
        return {"profile": mig.canonical(r.profile), "model": model if r.model else ""}

    def resource(self, r):
        return mig.resource_name(r.profile), r.count

    def share(self, r):
        return 1.0  # the slice is the visible device; its memory is enforced by hardware

    def physical_share(self, r):
        if r.unchecked:
            return 1.0
        return mig.lookup(r.profile, r.model)[1].memory_fraction

    def gpus_per_pod(self, r):
        return 1

    def text(self, r):
        return r.profile, [*([f"model={r.model}"] if r.model else []), *product_option(r),
                           *(["unchecked=true"] if r.unchecked else [])]


KIND = MigSlice()
