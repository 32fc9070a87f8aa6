"""``kfp-gpu train-resnet``: the Horovod ResNet trainer's command line, one flag per
:class:`kfp_gpu.training.horovod_config.HorovodConfig` field; run it under mpirun (one
process per GPU). ``python -m kfp_gpu.cli.train_resnet`` is the same command without the
rest of the CLI (that module only runs :func:`main`: the CLI package never imports it, so
runpy finds it unimported and warns of nothing)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Annotated

import typer

from kfp_gpu.training import resnet_data
from kfp_gpu.training.horovod_config import HorovodConfig


def train_resnet_command(
    mode: Annotated[str, typer.Option(help="train (real data) or benchmark (synthetic)")] = "train",
    model: Annotated[str, typer.Option(help="small | resnet50 (default: resnet50 for "
                                            "benchmark, small for train)")] = "",
    data: Annotated[str, typer.Option(help="IDX dir, 'fashion-mnist', .npz, kfp-gpu Dataset "
                                           "dir or 'synthetic'")] = resnet_data.FASHION_MNIST,
    test_data: Annotated[str, typer.Option(help="Dataset dir/npz holding the test split")] = "",
    image_size: Annotated[int, typer.Option(help="synthetic image side (benchmark)")] = 224,
    batch_size: Annotated[int, typer.Option(help="images per step per GPU/process")] = 32,
    epochs: Annotated[int, typer.Option(help="epochs (train)")] = 1,
    steps: Annotated[int, typer.Option(help="train: max steps/epoch (0=all); benchmark: "
                                            "timed steps (0=100)")] = 0,
    warmup_steps: Annotated[int, typer.Option(help="steps excluded from img/sec")] = 10,
    lr: Annotated[float, typer.Option(help="learning rate per worker (x world size)")] = 0.0125,
    lr_warmup_steps: Annotated[int, typer.Option(help="linear LR warm-up steps")] = 100,
    optimizer: Annotated[str, typer.Option(help="sgd (momentum 0.9) | adam")] = "sgd",
    mixed_precision: Annotated[bool | None, typer.Option(
        help="mixed precision: bfloat16 on GPUs of compute capability >= 8.0, float16 + loss "
             "scaling below [default: on with a GPU, off on CPU]", show_default=False)] = None,
    xla: Annotated[bool | None, typer.Option(
        help="XLA-compile forward/backward [default: on with a GPU, off on CPU]",
        show_default=False)] = None,
    allreduce: Annotated[bool, typer.Option(help="--no-allreduce only to demonstrate "
                                                 "drifting ranks")] = True,
    output_dir: Annotated[str, typer.Option(help="model/, metrics.json, checkpoints/ "
                                                 "(local or gs://)")] = "",
    model_dir: Annotated[str, typer.Option(help="override: model directory")] = "",
    metrics_path: Annotated[str, typer.Option(help="override: metrics JSON path")] = "",
    checkpoint_dir: Annotated[str, typer.Option(help="override: checkpoint directory")] = "",
    blocks: Annotated[int, typer.Option(help="small model: blocks per stage")] = 2,
    width: Annotated[int, typer.Option(help="small model: first-stage filters")] = 16,
    classes: Annotated[int, typer.Option(help="benchmark model classes")] = 1000,
    synthetic_rows: Annotated[int, typer.Option(help="rows of --data synthetic")] = 6000,
    seed: Annotated[int, typer.Option(help="init/shuffle seed")] = 0,
) -> None:
    """Horovod ResNet trainer; run it under mpirun (one process per GPU)."""
    settings = dict(locals())
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = HorovodConfig(**{f.name: settings[f.name] for f in dataclasses.fields(HorovodConfig)})
    try:
        cfg.resolved()
        if cfg.mode == "train":  # a missing input is the user's: one line, exit 2
            for source in (cfg.data, cfg.test_data):
                resnet_data.check_source(source)
    except (ValueError, FileNotFoundError) as e:
        raise typer.BadParameter(str(e)) from e
    # Past the settings, a failure is the training's (TensorFlow, Horovod, MPI): its
    # traceback goes to the rank's log with the one error line (kfp_gpu.cli.errors).
    from kfp_gpu.cli import errors

    errors.set_verbose(True)
    # The Worker's device-plugin env (HAMi limits, ...) reaches sshd-started ranks only
    # through this file (kfp_gpu.training.worker_env): load it before TensorFlow starts CUDA.
    from kfp_gpu.training.worker_env import load_worker_env

    load_worker_env()
    # TensorFlow and Horovod load here, on the ranks only.
    from kfp_gpu.training.horovod_train import run

    run(cfg)


def main() -> None:  # pragma: no cover - thin
    """``python -m kfp_gpu.cli.train_resnet``: one line and exit 2 for a bad setting, as in
    ``kfp-gpu train-resnet`` (:class:`kfp_gpu.cli.errors.Command`)."""
    from kfp_gpu.cli import errors

    app = typer.Typer(add_completion=False)
    app.command(cls=errors.Command)(train_resnet_command)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
