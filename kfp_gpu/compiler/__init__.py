"""Making the YAML: :mod:`.compile` (KFP's compiler over every entry of the catalog,
:mod:`kfp_gpu.catalog`, the images applied, the IR checks of :mod:`.ir_checks`) and the
generated package list of pyproject.toml (:mod:`.packaging`). What is published (image
names, digests) is :mod:`kfp_gpu.release`; what pipeline modules author tasks with is
:mod:`kfp_gpu.dsl`.
"""
