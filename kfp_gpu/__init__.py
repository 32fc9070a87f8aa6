"""kfp-gpu: Kubeflow Pipelines (KFP v2) components and pipelines for GPU training.

Import root of the distribution ``kfp-gpu``. The component folders are mapped to
``kfp_gpu.components`` and the pipelines to ``kfp_gpu.pipelines`` (see pyproject.toml);
docs/architecture.md shows the packages and how a GPU request flows to a pod spec.

The root holds only :data:`__version__` (also the runtime images' tag) and imports nothing
of the package, so ``import kfp_gpu`` is cheap in every process, MPI ranks included. The
public API is the subpackages, imported by their names: :mod:`kfp_gpu.gpu` (GPU requests:
``parse``, ``GpuRequest``; ``gpu.memory_cap.apply_gpu_share``), :mod:`kfp_gpu.mpi`
(MPIJob specs and their launch), :mod:`kfp_gpu.training`, :mod:`kfp_gpu.dsl` (what a
pipeline module imports to define tasks), :mod:`kfp_gpu.catalog`, :mod:`kfp_gpu.compiler`,
:mod:`kfp_gpu.cluster`, :mod:`kfp_gpu.release` (``images.image``), :mod:`kfp_gpu.inputs`.
"""

from __future__ import annotations

from kfp_gpu._compat import restore_message_factory_get_prototype

__version__ = "0.1.0"
__all__ = ["__version__"]

restore_message_factory_get_prototype()
