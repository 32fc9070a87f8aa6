"""KFP component ``train_text_classifier``: the Keras Embedding -> LSTM -> Dense classifier."""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from kfp_gpu.release import images


@dsl.component(base_image=images.image(images.TRAINER), install_kfp_package=False)
def train_text_classifier(
    train_data: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    report: Output[Artifact],
    tensorboard: Output[Artifact],
    epochs: int = 2,
    batch_size: int = 32,
    embedding_dim: int = 128,
    lstm_units: int = 128,
    dropout: float = 0.0,
    recurrent_dropout: float = 0.0,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    unroll: bool = False,
    use_bias: bool = True,
    learning_rate: float = 0.001,
    lr_schedule: str = "cosine",
    seed: int = 42,
    mixed_precision: bool = False,
    allow_generic_kernel: bool = False,
    checkpoint_dir: str = "",
):
    """Train Embedding -> LSTM -> Dense(sigmoid) on token-id sequences, on one GPU or CPU.

    The GPU (whole or a fraction) is requested by the pipeline on this task; the share
    it was given is applied as a TensorFlow memory cap first (kfp_gpu.gpu.memory_cap). The LSTM
    must stay cuDNN-eligible (activation tanh, recurrent_activation sigmoid,
    recurrent_dropout 0, unroll False, use_bias True; Keras' cudnn_ok conditions);
    other values are refused with the reason unless ``allow_generic_kernel``.

    Args:
        train_data: Dataset of (int32 [maxlen] token ids, int32 label 0/1) from prep_text.
        epochs, batch_size, embedding_dim, lstm_units, dropout, learning_rate, seed:
            hyper-parameters (batch 32, 128/128 units: the seed article's model).
        lr_schedule: ``cosine`` (Adam's rate decays from learning_rate to 0 over the
            epochs; the model overfits in its second epoch at a constant rate) or
            ``constant`` (kfp_gpu.training.text_model.LR_SCHEDULES).
        mixed_precision: mixed_float16 compute (GPUs with tensor cores).
        checkpoint_dir: where per-epoch training state is kept for resumption, in a
            subfolder per (settings, data); a PVC path or gs:// URI survives pod
            restarts; empty: beside the model output, which resumes only inside the same
            container (KFP gives a retried pod a fresh filesystem).

    Outputs:
        model: directory with ``model.keras`` (keras.saving.load_model).
        metrics: seconds_per_epoch, ms_per_step, samples_per_sec, loss, accuracy,
            epochs_run, resumed_from_epoch, cudnn_eligible (1/0), epoch_<i>_seconds.
        report: JSON with the same and the device used.
        tensorboard: TensorBoard log directory.

    Raises:
        ValueError: invalid or cuDNN-ineligible settings (before the model is built).
    """
    import logging

    from kfp_gpu.components.train_text_classifier import train as t
    from kfp_gpu.gpu import memory_cap

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = t.TrainConfig(
        epochs=epochs, batch_size=batch_size, embedding_dim=embedding_dim,
        lstm_units=lstm_units, dropout=dropout, recurrent_dropout=recurrent_dropout,
        activation=activation, recurrent_activation=recurrent_activation, unroll=unroll,
        use_bias=use_bias, learning_rate=learning_rate, lr_schedule=lr_schedule, seed=seed,
        mixed_precision=mixed_precision, allow_generic_kernel=allow_generic_kernel)
    cfg.validate()
    applied = memory_cap.apply_gpu_share()
    result = t.train(cfg, train_path=train_data.path, model_dir=model.path,
                     checkpoint_dir=checkpoint_dir or model.path.rstrip("/") + ".checkpoints",
                     tensorboard_dir=tensorboard.path)
    result["gpu_share"] = applied
    t.write_report(report.path, result)
    for key in ("seconds_per_epoch", "ms_per_step", "samples_per_sec", "loss", "accuracy",
                "epochs_run", "resumed_from_epoch", "train_rows"):
        if result.get(key) is not None:
            metrics.log_metric(key, float(result[key]))
    metrics.log_metric("cudnn_eligible", float(result["cudnn_eligible"]))
    for i, sec in enumerate(result["epoch_seconds"], start=result["resumed_from_epoch"] + 1):
        metrics.log_metric(f"epoch_{i}_seconds", float(sec))
    model.metadata.update({"framework": "keras", "file": t.MODEL_FILE,
                           "device": result["device"]})
    from kfp_gpu import task_outputs  # one record line for `kfp-gpu submit --wait`

    task_outputs.emit({"model": model, "metrics": metrics, "report": report,
                       "tensorboard": tensorboard})
