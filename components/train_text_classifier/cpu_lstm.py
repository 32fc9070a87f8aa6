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
    if return_sequences:
        hs, h, c = _lstm(x_tm, initial_state_h, initial_state_c, *values, sequences=True)
        return h, tf.transpose(hs, [1, 0, 2]), [h, c]
    h, c = _lstm(x_tm, initial_state_h, initial_state_c, *values, sequences=False)
    return h, tf.expand_dims(h, 1), [h, c]


def _lstm(x_tm, h0, c0, kernel, recurrent_kernel, bias, *, sequences: bool):
    """``(hs [T, B, U], h_T, c_T)`` (``(h_T, c_T)`` if not ``sequences``), hand-differentiated.

    Without ``sequences`` the per-step outputs are not an output of the op, so the
    backward loop has no gradient to add for them.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def run(x_tm, h0, c0, kernel, recurrent_kernel, bias):
        shape = tf.shape(x_tm)
        x2 = tf.reshape(x_tm, [-1, shape[2]])
        xw = tf.reshape(tf.matmul(x2, kernel) + bias, [shape[0], shape[1], -1])
        hs, cs, gates, h, c = _forward(xw, h0, c0, recurrent_kernel)

        def grad(*upstream):
            d_hs, d_h, d_c = upstream if sequences else (None, *upstream)
            d_h = tf.zeros_like(h) if d_h is None else d_h
            d_c = tf.zeros_like(c) if d_c is None else d_c
            c_prev = tf.concat([c0[None], cs[:-1]], 0)
            dz, dh0, dc0 = _backward(gates, cs, c_prev, recurrent_kernel, d_hs, d_h, d_c)
            dz2 = tf.reshape(dz, [-1, tf.shape(dz)[2]])
            h_prev = tf.reshape(tf.concat([h0[None], hs[:-1]], 0), [-1, tf.shape(h0)[1]])
            dx = tf.reshape(tf.matmul(dz2, kernel, transpose_b=True), shape)
            return (dx, dh0, dc0, tf.matmul(x2, dz2, transpose_a=True),
                    tf.matmul(h_prev, dz2, transpose_a=True), tf.reduce_sum(dz2, 0))

        return ((hs, h, c) if sequences else (h, c)), grad

    return run(x_tm, h0, c0, kernel, recurrent_kernel, bias)


def _forward(xw, h0, c0, recurrent_kernel):
    """The recurrence over ``xw [T, B, 4U]``; returns hs, cs, gates (all per step), h, c."""
    import tensorflow as tf

    steps = tf.shape(xw)[0]
    xs = tf.TensorArray(xw.dtype, size=steps).unstack(xw)
    arrays = [tf.TensorArray(xw.dtype, size=steps) for _ in range(3)]
    units = tf.shape(recurrent_kernel)[0]
    is_g = tf.range(4 * units) // units == 2  # [4U]: True on the g block (i, f, g, o)

    def step(t, h, c, th, tc, tg):
        z = xs.read(t) + tf.matmul(h, recurrent_kernel)
        # sigmoid for the i, f, o gates and tanh for the cell input g, in 3 ops, not 6
        gates = tf.where(is_g, tf.tanh(z), tf.sigmoid(z))
        i, f, g, o = tf.split(gates, 4, axis=1)
        c = f * c + i * g
        h = o * tf.tanh(c)
        return t + 1, h, c, th.write(t, h), tc.write(t, c), tg.write(t, gates)

    _, h, c, th, tc, tg = tf.while_loop(lambda t, *_: t < steps, step,
                                        (tf.constant(0), h0, c0, *arrays))
    return th.stack(), tc.stack(), tg.stack(), h, c


def _backward(gates, cs, c_prev, recurrent_kernel, d_hs, d_h, d_c):
    """Back-propagation through time; returns dz ``[T, B, 4U]`` (pre-activation), dh0, dc0."""
    import tensorflow as tf

    steps = tf.shape(gates)[0]
    i, f, g, o = tf.split(gates, 4, axis=2)
    tanh_c = tf.tanh(cs)
    # Per-step factors computed for all steps at once, outside the loop:
    # dz = [dc, dc, dc, dh] * factors, dc = dc_next + dh * dc_from_h.
    dc_from_h = o * (1.0 - tanh_c * tanh_c)
    factors = tf.concat([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g),
                         tanh_c * o * (1.0 - o)], 2)
    read = [tf.TensorArray(gates.dtype, size=steps).unstack(a)
            for a in (dc_from_h, factors, f)]
    outs = None if d_hs is None else tf.TensorArray(gates.dtype, size=steps).unstack(d_hs)
    dz_ta = tf.TensorArray(gates.dtype, size=steps)

    def step(t, dh_next, dc_next, dz_ta):
        dh = dh_next if outs is None else dh_next + outs.read(t)
        dc = dc_next + dh * read[0].read(t)
        dz = tf.concat([dc, dc, dc, dh], 1) * read[1].read(t)
        dh_prev = tf.matmul(dz, recurrent_kernel, transpose_b=True)
        return t - 1, dh_prev, dc * read[2].read(t), dz_ta.write(t, dz)

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
