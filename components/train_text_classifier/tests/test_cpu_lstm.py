"""The fused CPU LSTM kernel: same numbers as Keras' generic loop, CPU only, model unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from kfp_gpu.components.train_text_classifier import cpu_lstm
from kfp_gpu.components.train_text_classifier import train as t


def _outputs_and_grads(layer, x, use_function: bool):
    import tensorflow as tf

    def run():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out, h, c = layer(x, training=True)
            loss = tf.reduce_sum(out ** 2) + tf.reduce_sum(tf.sin(h)) + 0.3 * tf.reduce_sum(c)
        return [out, h, c, *tape.gradient(loss, [x, *layer.trainable_weights])]

    return [a.numpy() for a in (tf.function(run)() if use_function else run())]


@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("use_function", [False, True])
def test_fused_kernel_matches_keras_generic_loop(return_sequences, use_function):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(3)
    layer = keras.layers.LSTM(16, return_sequences=return_sequences, return_state=True)
    x = tf.constant(np.random.default_rng(0).standard_normal((4, 9, 5)).astype("float32"))
    layer(x)
    reference = _outputs_and_grads(layer, x, use_function)
    with cpu_lstm.cpu_fused_lstm() as installed:
        fused = _outputs_and_grads(layer, x, use_function)
    assert installed is True
    names = ["output", "h", "c", "d_x", "d_kernel", "d_recurrent_kernel", "d_bias"]
    for name, a, b in zip(names, reference, fused, strict=True):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)


def test_fused_kernel_is_really_called_and_restored():
    import keras
    from keras.src import backend

    original = backend.lstm
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return cpu_lstm.fused_lstm(*args, **kwargs)

    layer = keras.layers.LSTM(4)
    x = np.ones((2, 3, 5), "float32")
    with cpu_lstm.cpu_fused_lstm():
        assert backend.lstm is cpu_lstm.fused_lstm
        backend.lstm = spy
        layer(x)
    assert calls == [1]
    assert backend.lstm is original


def test_not_installed_when_disabled_or_on_gpu(monkeypatch):
    from keras.src import backend

    original = backend.lstm
    with cpu_lstm.cpu_fused_lstm(False) as installed:
        assert installed is False and backend.lstm is original
    monkeypatch.setattr(cpu_lstm, "_gpu_visible", lambda: True)
    with cpu_lstm.cpu_fused_lstm() as installed:
        assert installed is False and backend.lstm is original


def test_masked_input_falls_back_to_keras_loop_with_same_result():
    import keras

    keras.utils.set_random_seed(5)
    ids = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    model = keras.Model(ids, keras.layers.LSTM(3, go_backwards=True)(x))
    batch = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 9]], "int32")
    expected = model(batch).numpy()
    with cpu_lstm.cpu_fused_lstm():
        got = model(batch).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_model_is_unchanged_and_not_xla_compiled():
    model = t.build_model(t.TrainConfig(), 20000, 80, steps_per_epoch=782)
    layers = [(type(layer).__name__, layer.count_params()) for layer in model.layers]
    assert layers == [("InputLayer", 0), ("Embedding", 20000 * 128),
                      ("LSTM", 4 * 128 * (128 + 128 + 1)), ("Dense", 129)]
    assert model.output_shape == (None, 1)
    lstm = model.get_layer("lstm").get_config()
    assert (lstm["unroll"], lstm["recurrent_dropout"], lstm["use_bias"]) == (False, 0.0, True)
    assert model.jit_compile is False
    assert type(model.optimizer).__name__ == "Adam"
    # the default schedule: cosine from 1e-3 to 0 over both epochs' 2 x 782 steps
    schedule = model.optimizer._learning_rate
    assert type(schedule).__name__ == "CosineDecay"
    assert schedule.get_config()["decay_steps"] == 2 * 782
    assert float(schedule(0)) == pytest.approx(1e-3)
    assert float(schedule(782)) == pytest.approx(5e-4)
    assert float(schedule(2 * 782)) == pytest.approx(0.0, abs=1e-9)


def test_constant_schedule_keeps_the_rate_and_cosine_needs_the_steps():
    model = t.build_model(t.TrainConfig(lr_schedule="constant"), 100, 8)
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="needs steps_per_epoch >= 1"):
        t.build_model(t.TrainConfig(), 100, 8)
    with pytest.raises(ValueError, match="lr_schedule must be one of cosine, constant"):
        t.TrainConfig(lr_schedule="linear").validate()


@pytest.mark.parametrize("device,fused,violations,expected", [
    ("CPU", True, [], "fused-cpu"),
    ("CPU", False, [], "generic"),
    ("GPU:0 (NVIDIA H100) x1", True, [], "cudnn"),
    ("GPU:0 (NVIDIA H100) x1", True, ["recurrent_dropout=0.2"], "generic"),
    ("CPU", True, ["unroll=True"], "generic"),
])
def test_lstm_kernel_name(device, fused, violations, expected):
    assert t.lstm_kernel(device, fused, violations) == expected


def test_importing_train_turns_onednn_on_before_tensorflow():
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    code = ("from kfp_gpu.components.train_text_classifier import train as t; "
            "print('onednn', t.onednn_enabled())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert "onednn True" in out
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # an explicit setting wins
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert "onednn False" in out


def test_jit_compile_follows_the_backend():
    """XLA only where it keeps cuDNN and measured faster (jax); never under TensorFlow (the
    cuDNN LSTM is not XLA-compatible, and XLA was slower on CPU) or torch."""
    from kfp_gpu.training.text_model import jit_compile_for

    assert jit_compile_for("jax") is True
    assert jit_compile_for("tensorflow") is False and jit_compile_for("torch") is False
