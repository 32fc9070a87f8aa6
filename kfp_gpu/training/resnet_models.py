"""ResNet models for the Horovod trainer (Keras 3; TensorFlow imported lazily).

- ``resnet50``: ``keras.applications.ResNet50(weights=None)``, the model of the Horovod
  synthetic benchmark (He et al. 2016; 25.6 M parameters at 1000 classes).
- ``small``: a residual net sized for small inputs (28x28 Fashion-MNIST, 32x32 CIFAR), the
  CIFAR layout of He et al. 2016 section 4.2: a 3x3 stem, three stages of basic blocks
  (two 3x3 conv + BatchNorm + ReLU, identity or 1x1-projection shortcut) with
  ``width, 2*width, 4*width`` filters and stride 2 between stages, global average pooling,
  softmax. ``blocks`` per stage n gives depth 6n+2 (n=3: ResNet-20). Convolutions start
  from He initialisation (``he_normal``), as that section does ("we adopt the weight
  initialization in [13]", He et al. 2015).

Both take pixels in the ``uint8`` range 0..255 (any numeric dtype; a ``Rescaling(1/255)``
layer inside the model scales them, so the saved model takes the Dataset artifacts' raw
images) and end in a float32
softmax over ``classes`` (float32 even under the ``mixed_float16`` policy, as the Keras
mixed-precision guide asks for the output layer).
"""

from __future__ import annotations

MODELS = ("small", "resnet50")


def build(name: str, input_shape: tuple[int, int, int], classes: int, blocks: int = 2,
          width: int = 16, seed: int = 0):
    """Build an uncompiled Keras model.

    Args:
        name: ``small`` or ``resnet50``.
        input_shape: ``(H, W, C)``; ResNet50 needs H, W >= 32.
        classes: number of output classes (>= 2).
        blocks: basic blocks per stage (``small`` only), >= 1.
        width: filters of the first stage (``small`` only), >= 1.
        seed: initialiser seed, so every rank builds the same start even before the broadcast.

    Returns:
        ``keras.Model`` mapping ``[B, H, W, C]`` pixels (0..255) to ``float32 [B, classes]``.
        BatchNorm momentum is 0.9 in ``small`` (Keras default 0.99) so the moving
        statistics settle within the few hundred steps of a short run. He initialisation
        matters for them too: with pixels scaled to 0..1, Glorot-initialised stem filters
        give the first BatchNorm batch variances of about 0.002-0.06 per channel, so the
        share of its initial moving variance (1.0) left after a short run (0.9**40 = 1.5 %
        after 40 steps) inflates them several times over and the saved model's inference
        is off (Fashion-MNIST test accuracy 0.22 instead of > 0.3 in
        tests/components/test_resnet_pipeline_local.py); He's variance 2/fan_in puts them at about
        0.05-0.8 (seed 0, 256 Fashion-MNIST images).

    Raises:
        ValueError: unknown ``name`` or out-of-range sizes.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; accepted: {', '.join(MODELS)}")
    if classes < 2:
        raise ValueError(f"classes must be >= 2, got {classes}")
    import keras

    keras.utils.set_random_seed(seed)
    if name == "resnet50":
        if min(input_shape[:2]) < 32:
            raise ValueError(f"resnet50 needs images of at least 32x32, got {input_shape}")
        inputs = keras.Input(input_shape)
        scaled = keras.layers.Rescaling(1.0 / 255)(inputs)
        base = keras.applications.ResNet50(weights=None, include_top=False,
                                           input_tensor=scaled, pooling="avg")
        out = keras.layers.Dense(classes, activation="softmax", dtype="float32",
                                 name="predictions")(base.output)
        return keras.Model(inputs, out, name="resnet50")
    if blocks < 1 or width < 1:
        raise ValueError(f"blocks and width must be >= 1, got {blocks}, {width}")
    layers = keras.layers

    def conv(filters: int, size: int, strides: int = 1):
        return layers.Conv2D(filters, size, strides=strides, padding="same", use_bias=False,
                             kernel_initializer="he_normal")

    inputs = keras.Input(input_shape)
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = conv(width, 3)(x)
    x = layers.BatchNormalization(momentum=0.9)(x)
    x = layers.ReLU()(x)
    for stage in range(3):
        filters = width * 2 ** stage
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            shortcut = x
            y = conv(filters, 3, stride)(x)
            y = layers.BatchNormalization(momentum=0.9)(y)
            y = layers.ReLU()(y)
            y = conv(filters, 3)(y)
            y = layers.BatchNormalization(momentum=0.9)(y)
            if stride != 1 or shortcut.shape[-1] != filters:
                shortcut = conv(filters, 1, stride)(shortcut)
                shortcut = layers.BatchNormalization(momentum=0.9)(shortcut)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes, activation="softmax", dtype="float32", name="predictions")(x)
    return keras.Model(inputs, outputs, name=f"resnet{6 * blocks + 2}_small")
