"""``mig:PROFILE``: one MIG slice, ``nvidia.com/mig-<profile>: 1`` (k8s-device-plugin,
``migStrategy: mixed``); the profile is checked against the tables of :mod:`kfp_gpu.gpu.mig`
(for ``model=`` or any model)."""

from kfp_gpu.gpu import mig
from kfp_gpu.gpu.kinds.base import Kind
from kfp_gpu.gpu.kinds.whole import product_option


class MigSlice(Kind):
    name = "mig"
    options = frozenset({"model", "product"})

    def parse(self, value, opts):
        return {"kind": "mig", "count": 1, "profile": value, "model": opts.get("model", ""),
                "product": opts.get("product", "")}

    def validate(self, r):
        if r.count != 1:
            raise ValueError("mig: exactly one MIG device per container (a CUDA process "
                             "enumerates one MIG instance); use several tasks for more")
        mig.lookup(r.profile, r.model)

    def normalized(self, r) -> dict:
        """Canonical profile (lower case) and model key (as in the tables)."""
        model, _ = mig.lookup(r.profile, r.model)
        return {"profile": r.profile.strip().lower(), "model": model if r.model else ""}

    def resource(self, r):
        return mig.resource_name(r.profile), r.count

    def share(self, r):
        return 1.0  # the slice is the visible device; its memory is enforced by hardware

    def physical_share(self, r):
        return mig.lookup(r.profile, r.model)[1].memory_fraction

    def gpus_per_pod(self, r):
        return 1

    def text(self, r):
        return r.profile, [*([f"model={r.model}"] if r.model else []), *product_option(r)]


KIND = MigSlice()
