"""kfp-gpu: Kubeflow Pipelines (KFP v2) components and pipelines for GPU training.

Import root of the distribution ``kfp-gpu``. The component folders are mapped to
``kfp_gpu.components`` and the pipelines to ``kfp_gpu.pipelines`` (see pyproject.toml).
"""

from kfp_gpu._compat import restore_message_factory_get_prototype

__version__ = "0.1.0"

restore_message_factory_get_prototype()
