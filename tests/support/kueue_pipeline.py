"""A pipeline whose distributed tasks queue in Kueue (``kueue_queue``), compiled by the real
KFP compiler, for the doctor tests (tests/unit/test_doctor_kueue.py and, on the real Kueue,
tests/cluster/test_kueue.py). (No ``from __future__ import annotations``: KFP reads the
pipeline's annotations as types.)"""

from pathlib import Path

import yaml


def queued_pipeline(path: Path, default: str = "team-a", constant: str = "team-b") -> list:
    """Compile a pipeline with two train_resnet_horovod tasks: one queued through a pipeline
    parameter (default ``default``), one through the constant ``constant``; return its
    YAML documents."""
    from kfp import compiler, dsl
    from kfp.dsl import Dataset

    from kfp_gpu.components.train_resnet_horovod.component import train_resnet_horovod

    @dsl.pipeline(name="queued")
    def queued(queue: str = default):
        data = dsl.importer(artifact_uri="gs://bucket/data", artifact_class=Dataset)
        train_resnet_horovod(train_data=data.output, test_data=data.output,
                             kueue_queue=queue)
        if constant:
            train_resnet_horovod(train_data=data.output, test_data=data.output,
                                 kueue_queue=constant)

    compiler.Compiler().compile(queued, str(path))
    return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
