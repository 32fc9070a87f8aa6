"""kfp-gpu: Kubeflow Pipelines (KFP v2) components and pipelines for GPU training.

Import root of the distribution ``kfp-gpu``. The component folders are mapped to
``kfp_gpu.components`` and the pipelines to ``kfp_gpu.pipelines`` (see pyproject.toml);
docs/architecture.md shows the packages and how a GPU request flows to a pod spec.

The public API is :data:`__all__`. Names load on first use (PEP 562 ``__getattr__``), so
``import kfp_gpu`` imports neither TensorFlow, the Kubernetes client nor typer.
"""

from __future__ import annotations

import importlib

from kfp_gpu._compat import restore_message_factory_get_prototype

__version__ = "0.1.0"

restore_message_factory_get_prototype()

#: Public name -> (module, attribute); attribute None = the module itself.
_PUBLIC: dict[str, tuple[str, str | None]] = {
    # subpackages
    "gpu": ("kfp_gpu.gpu", None),
    "mpi": ("kfp_gpu.mpi", None),
    "training": ("kfp_gpu.training", None),
    "cluster": ("kfp_gpu.cluster", None),
    "compiler": ("kfp_gpu.compiler", None),
    "release": ("kfp_gpu.release", None),
    "dsl": ("kfp_gpu.dsl", None),
    "catalog": ("kfp_gpu.catalog", None),
    "inputs": ("kfp_gpu.inputs", None),
    # GPU requests: text form -> task settings / pod fragment; runtime memory cap
    "GpuRequest": ("kfp_gpu.gpu.request", "GpuRequest"),
    "parse_gpu_request": ("kfp_gpu.gpu.request", "parse"),
    "apply_gpu_share": ("kfp_gpu.gpu.memory_cap", "apply_gpu_share"),
    # MPIJobs: options -> spec -> launched job
    "MPIJobOptions": ("kfp_gpu.mpi.spec.options", "MPIJobOptions"),
    "build_mpijob": ("kfp_gpu.mpi.spec.mpijob", "build"),
    "job_name": ("kfp_gpu.mpi.spec.names", "job_name"),
    "launch": ("kfp_gpu.mpi.launch.launcher", "launch"),
    # runtime images (tag = package version)
    "image": ("kfp_gpu.release.images", "image"),
}

# "__version__" and the keys of _PUBLIC (tests/test_architecture.py checks they agree).
__all__ = [
    "GpuRequest",
    "MPIJobOptions",
    "__version__",
    "apply_gpu_share",
    "build_mpijob",
    "catalog",
    "cluster",
    "compiler",
    "dsl",
    "gpu",
    "image",
    "inputs",
    "job_name",
    "launch",
    "mpi",
    "parse_gpu_request",
    "release",
    "training",
]


def __getattr__(name: str):
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'kfp_gpu' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
