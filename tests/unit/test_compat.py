"""TensorFlow 2.18 imports cleanly on protobuf 6 once kfp_gpu is imported first."""

import subprocess
import sys


def test_tensorflow_import_after_kfp_gpu_prints_no_protobuf_errors():
    code = "import kfp_gpu, tensorflow as tf; print(tf.__version__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "GetPrototype" not in p.stderr, p.stderr[-2000:]
    raw = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                         text=True, check=True)
    assert "GetPrototype" in raw.stderr  # the shim is what makes the difference


def test_get_prototype_returns_the_message_class():
    from google.protobuf import descriptor_pb2, message_factory

    import kfp_gpu  # noqa: F401

    cls = message_factory.MessageFactory().GetPrototype(descriptor_pb2.FileDescriptorProto.DESCRIPTOR)
    assert cls is descriptor_pb2.FileDescriptorProto
