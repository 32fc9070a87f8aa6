"""The authoring floor: what a pipeline module imports to define its tasks and itself.

- :mod:`kfp_gpu.dsl.entry` -- :class:`~kfp_gpu.dsl.entry.PipelineEntry`, the one object
  each ``pipelines/<name>.py`` exports as ``ENTRY`` (name, factory, parameters, default
  GPU request, local data and checks, task resources);
- :mod:`kfp_gpu.dsl.parameters` -- the parameter declaration (type, accepted values,
  meaning) and its checks against the ``@dsl.pipeline`` signature;
- :mod:`kfp_gpu.dsl.paths` -- which text parameters name files or store URIs;
- :mod:`kfp_gpu.dsl.task_settings` -- credentials, volumes, CPU and memory on tasks;
- :mod:`kfp_gpu.dsl.k8s_rules` -- Kubernetes name and quantity rules, checked early.

Nothing here imports a pipeline or lists them: :mod:`kfp_gpu.catalog` does, above.
"""
