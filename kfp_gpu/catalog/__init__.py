"""The catalog: every component and pipeline of the suite, found from the packages, and the
one place that imports them by name (:mod:`kfp_gpu.catalog.discover`).

- :mod:`kfp_gpu.catalog.discover` -- component names and pipeline entries
  (:class:`kfp_gpu.dsl.entry.PipelineEntry`);
- :mod:`kfp_gpu.catalog.params` -- what the entries declare, read for ``kfp-gpu params``,
  docs/parameters.md, ``compile --resources`` and the checks before a run;
- :mod:`kfp_gpu.catalog.arguments` -- ``-p key=value`` text typed and checked once, for
  ``run --local``, ``submit`` and ``params`` alike.

Above it: :mod:`kfp_gpu.compiler` (compile, IR checks, packaging), :mod:`kfp_gpu.local`
and :mod:`kfp_gpu.cluster`; below it: the pipelines, the components and :mod:`kfp_gpu.dsl`.
"""
