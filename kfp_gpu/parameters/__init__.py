"""Pipeline parameters, one idea in two modules:

- :mod:`kfp_gpu.parameters.declared` -- the declaration: each pipeline's ``PARAMETERS``
  table (type, default, accepted values, meaning), checked against the pipeline's signature
  when it compiles and rendered as docs/parameters.md (``kfp-gpu params``).
- :mod:`kfp_gpu.parameters.command_line` -- the command line: ``-p key=value`` text
  (``kfp-gpu run --local``, ``kfp-gpu submit``) parsed into typed arguments and checked
  against that declaration before anything runs.
"""
