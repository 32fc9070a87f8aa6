"""GPU request kinds, one module each (see :mod:`kfp_gpu.gpu.request` for the text forms).

:data:`REGISTRY` maps each kind's name to its :class:`~kfp_gpu.gpu.kinds.base.Kind`.
"""

from kfp_gpu.gpu.kinds import dra, hami, kai, metagpu, mig, none, shared, whole
from kfp_gpu.gpu.kinds.base import Kind

REGISTRY: dict[str, Kind] = {k.name: k for k in (
    none.KIND, whole.KIND, mig.KIND, shared.KIND, kai.FRACTION, kai.GPU_MEMORY,
    metagpu.KIND, hami.KIND, dra.KIND)}
#: Kind names in the order of the docs.
KINDS = tuple(REGISTRY)
