"""What ``kfp-gpu compile`` compiles: every component and pipeline, by name.

Components: name -> ``"module:attribute"`` of the ``@dsl.component``; compiled to
``components/<name>/component.yaml``.
Pipelines: name -> ``"module:factory"``; the factory takes the GPU request text
(``gpu: str``, see kfp_gpu.gpu) and returns the ``@dsl.pipeline`` function; compiled
to ``pipelines/<name with - as _>.yaml`` with the factory's default request.
Modules here must not import TensorFlow at import time.
"""

from __future__ import annotations

import importlib

COMPONENTS: dict[str, str] = {
    "prep_text": "kfp_gpu.components.prep_text.component:prep_text",
    "train_text_classifier":
        "kfp_gpu.components.train_text_classifier.component:train_text_classifier",
    "evaluate_classifier": "kfp_gpu.components.evaluate_classifier.component:evaluate_classifier",
    "plan_shards": "kfp_gpu.components.plan_shards.component:plan_shards",
    "evaluate_shard": "kfp_gpu.components.evaluate_shard.component:evaluate_shard",
    "combine_shards": "kfp_gpu.components.combine_shards.component:combine_shards",
    "prep_images": "kfp_gpu.components.prep_images.component:prep_images",
    "train_resnet_mpijob": "kfp_gpu.components.train_resnet_mpijob.component:train_resnet_mpijob",
}

PIPELINES: dict[str, str] = {
    "imdb-lstm": "kfp_gpu.pipelines.imdb_lstm:build",
    "fractional-eval": "kfp_gpu.pipelines.fractional_eval:build",
    "resnet-horovod": "kfp_gpu.pipelines.resnet_horovod:build",
}

#: Pipelines' parameter for local data: name -> (parameter, path under KFP_GPU_DATA_DIR).
LOCAL_DATA: dict[str, tuple[str, str]] = {
    "imdb-lstm": ("source", "imdb/imdb_50k.csv.gz"),
    "resnet-horovod": ("source", "fashion-mnist"),
}


def resolve(ref: str):
    """Import ``"module:attribute"`` and return the attribute."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)

