"""Where input comes from and how it is refused: :mod:`.datadir` (the one data folder),
:mod:`.storage` (local paths and ``gs://``, atomic writes), :mod:`.checks` (the cheap checks
before any task starts) and :mod:`.errors` (the :class:`~kfp_gpu.inputs.errors.InputError`
family and the record line a failed component leaves). Imports no other kfp_gpu package
(the foundation contract in pyproject.toml)."""
