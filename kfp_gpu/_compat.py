"""Compatibility shim: TensorFlow 2.18 on protobuf 6.

kfp 2.17 needs protobuf >= 6.31; TensorFlow 2.18 was built for protobuf < 6. Its pybind11
proto casters still call ``MessageFactory.GetPrototype``, which protobuf 6 removed in
favour of ``message_factory.GetMessageClass``; on import TensorFlow then prints five
``AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'`` tracebacks
(and those casters fail). Restoring the method as the documented replacement's alias
fixes both. It must run before TensorFlow is imported, so ``kfp_gpu/__init__`` calls it.
"""

from __future__ import annotations


def restore_message_factory_get_prototype() -> bool:
    """Add ``MessageFactory.GetPrototype`` if this protobuf lacks it; True if added."""
    from google.protobuf import message_factory

    if hasattr(message_factory.MessageFactory, "GetPrototype"):
        return False

    def GetPrototype(self, descriptor):
        return message_factory.GetMessageClass(descriptor)

    message_factory.MessageFactory.GetPrototype = GetPrototype
    return True
