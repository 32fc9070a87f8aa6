"""A fused LSTM kernel for CPU training under Keras' TensorFlow backend.

Keras' ``keras.layers.LSTM`` first offers its inner loop to the backend's ``lstm``
function (keras/src/layers/rnn/lstm.py ``LSTM.inner_loop``); the TensorFlow backend
(keras/src/backend/tensorflow/rnn.py ``lstm``) runs cuDNN there when a GPU is visible
and raises ``NotImplementedError`` otherwise, so on a CPU Keras falls back to its
generic ``tf.while_loop`` that, per time step, multiplies the step's input AND the
state by their weights (forward) and differentiates each op (backward): 6 small
``[32, 128] x [128, 512]`` matmuls and some 60 tiny ops per step.

:func:`fused_lstm` is a CPU implementation of that same backend hook, computing the
same LSTM (gates i, f, c, o; sigmoid/tanh; Keras' weight layout): the input projection
``x @ kernel + bias`` of all time steps is one large matmul, the loop multiplies only the
state (1 matmul forward, 1 backward with a hand-written gradient that keeps the gates),
and the kernel/recurrent-kernel gradients are one large matmul each after the loop.
The layer, its config, its weights and the saved model are unchanged; only the kernel
the layer runs on a CPU differs, as cuDNN does on a GPU. :func:`cpu_fused_lstm` installs
it for a ``with`` block and only when no GPU is visible, so the cuDNN path is untouched.
Settings it does not cover (masks, go_backwards, time-major input, non-float32,
activations other than tanh/sigmoid, no bias) raise ``NotImplementedError`` so Keras
runs its generic loop, exactly as it does for cuDNN.
"""

from __future__ import annotations

import contextlib


def _supported(inputs, mask, bias, activation, recurrent_activation, go_backwards, unroll,
               time_major) -> bool:
    import keras
    import tensorflow as tf

    tanh = (keras.activations.tanh, tf.tanh, keras.ops.tanh)
    sigmoid = (keras.activations.sigmoid, tf.sigmoid, keras.ops.sigmoid)
    return (mask is None and bias is not None and not go_backwards and not unroll
            and not time_major and inputs.dtype == tf.float32
            and activation in tanh and recurrent_activation in sigmoid)


def fused_lstm(inputs, initial_state_h, initial_state_c, mask, kernel, recurrent_kernel, bias,
               activation, recurrent_activation, return_sequences=False, go_backwards=False,
               unroll=False, time_major=False):
    """Same contract as keras/src/backend/tensorflow/rnn.py ``lstm``, on any device.

    Args:
        inputs: float32 ``[batch, time, features]``.
        initial_state_h, initial_state_c: float32 ``[batch, units]``.
        kernel ``[features, 4*units]``, recurrent_kernel ``[units, 4*units]``,
            bias ``[4*units]``: Keras' LSTMCell weights (gate order i, f, c, o).

    Returns:
        ``(last_output [batch, units], outputs, [h, c])`` where ``outputs`` is
        ``[batch, time, units]`` if ``return_sequences`` else ``[batch, 1, units]``.

    Raises:
        NotImplementedError: for settings this kernel does not cover (Keras then runs
            its generic loop).
    """
    import tensorflow as tf

    if not _supported(inputs, mask, bias, activation, recurrent_activation, go_backwards,
                      unroll, time_major):
        raise NotImplementedError
    import keras

    values = [v.value if isinstance(v, keras.Variable) else tf.convert_to_tensor(v)
              for v in (kernel, recurrent_kernel, bias)]
    x_tm = tf.transpose(inputs, [1, 0, 2])
    hs, h, c = _lstm(x_tm, initial_state_h, initial_state_c, *values)
    outputs = tf.transpose(hs, [1, 0, 2]) if return_sequences else tf.expand_dims(h, 1)
    return h, outputs, [h, c]


def _lstm(x_tm, h0, c0, kernel, recurrent_kernel, bias):
    """``(hs [T, B, U], h_T, c_T)`` with a hand-written gradient (see module docstring)."""
    import tensorflow as tf

    @tf.custom_gradient
    def run(x_tm, h0, c0, kernel, recurrent_kernel, bias):
        shape = tf.shape(x_tm)
        x2 = tf.reshape(x_tm, [-1, shape[2]])
        xw = tf.reshape(tf.matmul(x2, kernel) + bias, [shape[0], shape[1], -1])
        hs, cs, gates, h, c = _forward(xw, h0, c0, recurrent_kernel)

        def grad(d_hs, d_h, d_c):
            d_hs = tf.zeros_like(hs) if d_hs is None else d_hs
            d_h = tf.zeros_like(h) if d_h is None else d_h
            d_c = tf.zeros_like(c) if d_c is None else d_c
            c_prev = tf.concat([c0[None], cs[:-1]], 0)
            dz, dh0, dc0 = _backward(gates, cs, c_prev, recurrent_kernel, d_hs, d_h, d_c)
            dz2 = tf.reshape(dz, [-1, tf.shape(dz)[2]])
            h_prev = tf.reshape(tf.concat([h0[None], hs[:-1]], 0), [-1, tf.shape(h0)[1]])
            dx = tf.reshape(tf.matmul(dz2, kernel, transpose_b=True), shape)
            return (dx, dh0, dc0, tf.matmul(x2, dz2, transpose_a=True),
                    tf.matmul(h_prev, dz2, transpose_a=True), tf.reduce_sum(dz2, 0))

        return (hs, h, c), grad

    return run(x_tm, h0, c0, kernel, recurrent_kernel, bias)


def _forward(xw, h0, c0, recurrent_kernel):
    """The recurrence over ``xw [T, B, 4U]``; returns hs, cs, gates (all per step), h, c."""
    import tensorflow as tf

    steps = tf.shape(xw)[0]
    xs = tf.TensorArray(xw.dtype, size=steps).unstack(xw)
    arrays = [tf.TensorArray(xw.dtype, size=steps) for _ in range(3)]

    def step(t, h, c, th, tc, tg):
        z = xs.read(t) + tf.matmul(h, recurrent_kernel)
        zi, zf, zg, zo = tf.split(z, 4, axis=1)
        i, f, o, g = tf.sigmoid(zi), tf.sigmoid(zf), tf.sigmoid(zo), tf.tanh(zg)
        c = f * c + i * g
        h = o * tf.tanh(c)
        return (t + 1, h, c, th.write(t, h), tc.write(t, c),
                tg.write(t, tf.concat([i, f, g, o], 1)))

    _, h, c, th, tc, tg = tf.while_loop(lambda t, *_: t < steps, step,
                                        (tf.constant(0), h0, c0, *arrays))
    return th.stack(), tc.stack(), tg.stack(), h, c


def _backward(gates, cs, c_prev, recurrent_kernel, d_hs, d_h, d_c):
    """Back-propagation through time; returns dz ``[T, B, 4U]`` (pre-activation), dh0, dc0."""
    import tensorflow as tf

    steps = tf.shape(gates)[0]
    i, f, g, o = tf.split(gates, 4, axis=2)
    tanh_c = tf.tanh(cs)
    # Per-step factors computed for all steps at once, outside the loop.
    dc_from_h = o * (1.0 - tanh_c * tanh_c)
    d_gates = tf.concat([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g)], 2)
    d_out = tanh_c * o * (1.0 - o)
    read = [tf.TensorArray(gates.dtype, size=steps).unstack(a)
            for a in (d_hs, dc_from_h, d_gates, d_out, f)]
    dz_ta = tf.TensorArray(gates.dtype, size=steps)

    def step(t, dh_next, dc_next, dz_ta):
        dh = dh_next + read[0].read(t)
        dc = dc_next + dh * read[1].read(t)
        dz = tf.concat([tf.tile(dc, [1, 3]) * read[2].read(t), dh * read[3].read(t)], 1)
        dh_prev = tf.matmul(dz, recurrent_kernel, transpose_b=True)
        return t - 1, dh_prev, dc * read[4].read(t), dz_ta.write(t, dz)

    _, dh0, dc0, dz_ta = tf.while_loop(lambda t, *_: t >= 0, step,
                                       (steps - 1, d_h, d_c, dz_ta))
    return dz_ta.stack(), dh0, dc0


@contextlib.contextmanager
def cpu_fused_lstm(enabled: bool = True):
    """Within the block, Keras LSTM layers use :func:`fused_lstm` (TensorFlow backend, no GPU).

    Swaps the ``lstm`` hook of ``keras.src.backend`` (what ``LSTM.inner_loop`` calls)
    and restores it on exit. Does nothing when ``enabled`` is False, under another
    Keras backend, or when TensorFlow sees a GPU (cuDNN stays in charge there).

    Yields:
        True if the fused kernel is installed, else False.
    """
    import keras

    if not enabled or keras.config.backend() != "tensorflow" or _gpu_visible():
        yield False
        return
    from keras.src import backend

    original = backend.lstm
    backend.lstm = fused_lstm
    try:
        yield True
    finally:
        backend.lstm = original


def _gpu_visible() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))
