"""train_text_classifier: cuDNN-eligibility refusal, real training, resumption."""

from __future__ import annotations

import json

import pytest

from kfp_gpu.components.train_text_classifier import train as t


@pytest.mark.parametrize("field,value", [
    ("recurrent_dropout", 0.2),
    ("activation", "relu"),
    ("recurrent_activation", "hard_sigmoid"),
    ("unroll", True),
    ("use_bias", False),
])
def test_cudnn_ineligible_settings_are_refused(field, value):
    cfg = t.TrainConfig(**{field: value})
    with pytest.raises(ValueError, match=rf"cuDNN kernel.*{field}={value!r}.*needs"):
        cfg.validate()


def test_refusal_lists_every_violation_and_can_be_overridden():
    cfg = t.TrainConfig(recurrent_dropout=0.2, unroll=True)
    with pytest.raises(ValueError) as e:
        cfg.validate()
    assert "recurrent_dropout=0.2" in str(e.value) and "unroll=True" in str(e.value)
    assert "dropout= (input dropout)" in str(e.value)
    t.TrainConfig(recurrent_dropout=0.2, allow_generic_kernel=True).validate()


def test_input_dropout_keeps_cudnn():
    assert t.cudnn_violations(t.TrainConfig(dropout=0.2)) == []
    t.TrainConfig(dropout=0.2).validate()


@pytest.mark.parametrize("kw", [{"epochs": 0}, {"batch_size": -1}, {"dropout": 1.0},
                                {"learning_rate": 0.0}, {"lstm_units": 1.5}])
def test_bad_hyperparameters(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        t.TrainConfig(**kw).validate()




def test_training_resumes_from_last_checkpoint(tmp_path, imdb_small, monkeypatch):
    import keras
    import numpy as np

    from kfp_gpu.training import datasets

    # constant rate: more epochs continue the same training (cosine: see the test below)
    cfg1 = t.TrainConfig(epochs=1, embedding_dim=16, lstm_units=8, batch_size=64,
                         lr_schedule="constant")
    ckpt = tmp_path / "ckpt"
    m1 = t.train(cfg1, train_path=imdb_small["train"], model_dir=str(tmp_path / "m1"),
                 checkpoint_dir=str(ckpt), tensorboard_dir=str(tmp_path / "tb"))
    assert m1["epochs_run"] == 1 and m1["resumed_from_epoch"] == 0
    assert m1["cudnn_eligible"] is True and m1["device"] == "CPU"
    # Keras' own loop by default; the fused CPU kernel is opt-in (KFP_GPU_FUSED_LSTM=1)
    assert m1["lstm_kernel"] == "generic" and isinstance(m1["onednn"], bool)
    assert m1["steps_per_epoch"] == 2000 // 64 + 1
    assert m1["samples_per_sec"] > 0 and m1["ms_per_step"] > 0
    # a "restarted task" asked for 2 epochs with the same checkpoint dir trains only 1 more
    cfg2 = t.TrainConfig(epochs=2, embedding_dim=16, lstm_units=8, batch_size=64,
                         lr_schedule="constant")
    monkeypatch.setenv(t.FUSED_LSTM_ENV, "1")
    m2 = t.train(cfg2, train_path=imdb_small["train"], model_dir=str(tmp_path / "m2"),
                 checkpoint_dir=str(ckpt), tensorboard_dir=str(tmp_path / "tb2"))
    assert m2["epochs_run"] == 1 and m2["resumed_from_epoch"] == 1
    assert m2["lstm_kernel"] == "fused-cpu"  # opted in, resuming the generic run's checkpoint
    model = keras.saving.load_model(tmp_path / "m2" / t.MODEL_FILE)
    x, _ = datasets.load_arrays(imdb_small["test"])
    p = model.predict(x[:8], verbose=0)
    assert p.shape == (8, 1) and np.all((p >= 0) & (p <= 1))
    assert list((tmp_path / "tb").rglob("events.out.tfevents*"))
    t.write_report(str(tmp_path / "r.json"), m2)
    assert json.loads((tmp_path / "r.json").read_text())["resumed_from_epoch"] == 1


def test_other_settings_or_data_never_resume_foreign_checkpoints(tmp_path, imdb_small):
    """The same checkpoint_dir with different settings starts at epoch 0, in its own folder."""
    ckpt = tmp_path / "ckpt"
    common = {"train_path": imdb_small["train"], "checkpoint_dir": str(ckpt),
              "tensorboard_dir": str(tmp_path / "tb")}
    a = t.train(t.TrainConfig(epochs=1, embedding_dim=8, lstm_units=4, batch_size=128),
                model_dir=str(tmp_path / "a"), **common)
    b = t.train(t.TrainConfig(epochs=1, embedding_dim=8, lstm_units=6, batch_size=128),
                model_dir=str(tmp_path / "b"), **common)
    assert a["resumed_from_epoch"] == 0 and b["resumed_from_epoch"] == 0
    assert b["epochs_run"] == 1 and len(list(ckpt.iterdir())) == 2
    # the finished run, retried: restores the last epoch, trains nothing, reports no throughput
    again = t.train(t.TrainConfig(epochs=1, embedding_dim=8, lstm_units=4, batch_size=128),
                    model_dir=str(tmp_path / "a2"), **common)
    assert again["resumed_from_epoch"] == 1 and again["epochs_run"] == 0
    assert again["samples_per_sec"] is None and again["loss"] is None
    cfg = t.TrainConfig(epochs=1, lr_schedule="constant")
    meta = {"rows": 10, "maxlen": 80}
    assert t.checkpoint_path("gs://b/ck/", cfg, meta).startswith("gs://b/ck/")
    assert t.checkpoint_path("/c", cfg, meta) == t.checkpoint_path(
        "/c", t.TrainConfig(epochs=5, lr_schedule="constant"), meta)  # the same, resumed
    # under cosine the epochs set the decay's length: 5 epochs are another training
    assert t.checkpoint_path("/c", t.TrainConfig(epochs=1), meta) != t.checkpoint_path(
        "/c", t.TrainConfig(epochs=5), meta)
    assert t.checkpoint_path("/c", cfg, meta) != t.checkpoint_path("/c", cfg, {**meta, "rows": 11})


def test_a_cosine_training_cut_after_epoch_one_resumes_on_the_same_curve(
        tmp_path, imdb_small, monkeypatch):
    """A pod killed after epoch 1 of 2: the retry restores the optimizer's step count, so the
    cosine rate goes on from its middle and reaches 0 at the end, instead of starting over."""
    import keras

    class Killed(Exception):
        pass

    class KillAtEpochTwo(keras.callbacks.TensorBoard):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise Killed
            super().on_epoch_begin(epoch, logs)

    cfg = t.TrainConfig(epochs=2, embedding_dim=8, lstm_units=4, batch_size=128)
    common = {"train_path": imdb_small["train"], "checkpoint_dir": str(tmp_path / "ckpt"),
              "tensorboard_dir": str(tmp_path / "tb")}
    with monkeypatch.context() as m:
        m.setattr(keras.callbacks, "TensorBoard", KillAtEpochTwo)
        with pytest.raises(Killed):
            t.train(cfg, model_dir=str(tmp_path / "m1"), **common)
    done = t.train(cfg, model_dir=str(tmp_path / "m2"), **common)
    assert done["resumed_from_epoch"] == 1 and done["epochs_run"] == 1
    model = keras.saving.load_model(tmp_path / "m2" / t.MODEL_FILE)
    steps = done["steps_per_epoch"]
    assert int(model.optimizer.iterations) == 2 * steps  # restored at `steps`, not at 0
    schedule = model.optimizer._learning_rate
    assert schedule.get_config()["decay_steps"] == 2 * steps
    assert float(schedule(model.optimizer.iterations)) == pytest.approx(0.0, abs=1e-9)
