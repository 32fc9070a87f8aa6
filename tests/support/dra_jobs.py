"""The MPIJob and TrainJob with a ``dra`` GPU request that the launcher's claim-template
tests start (tests/unit/test_launcher_dra.py, tests/unit/test_launcher_dra_orphans.py)."""

from __future__ import annotations

from kfp_gpu.mpi.spec import mpijob, options, trainjob


def make_job(gpu: str = "dra:mig=1g.10gb", name: str = "resnet-dra-1") -> dict:
    """An MPIJob of two Workers in namespace ``ml`` asking ``gpu``."""
    return mpijob.build(options.MPIJobOptions.from_settings(
        name=name, namespace="ml", image="horovod:test", program=("kfp-gpu", "train-resnet"),
        gpu=gpu, workers=2))


def make_trainjob(gpu: str, name: str) -> dict:
    """The TrainJob of the same options."""
    return trainjob.build(options.MPIJobOptions.from_settings(
        name=name, namespace="ml", image="horovod:test", program=("kfp-gpu", "train-resnet"),
        gpu=gpu, workers=2))
