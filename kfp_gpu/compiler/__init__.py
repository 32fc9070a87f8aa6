"""Making the YAML: the registry of components and pipelines (:mod:`.registry`, found
from the folders, not hand-kept), :mod:`.compile` (KFP's compiler, the images applied, the
IR checks of :mod:`.ir_checks`), Kubernetes' naming rules (:mod:`.k8s_rules`) and the
generated package list of pyproject.toml (:mod:`.packaging`). What is published (image
names, digests) is :mod:`kfp_gpu.release`; the pipelines' parameters :mod:`kfp_gpu.parameters`.
"""
