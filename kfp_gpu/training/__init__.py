"""Keras models, input pipelines and the Horovod trainer."""
