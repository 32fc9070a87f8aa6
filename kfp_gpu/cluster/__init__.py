"""Where pipelines run remotely: Kubernetes and KFP API access, ``kfp-gpu doctor`` and
``kfp-gpu submit``. Local runs have their own room, :mod:`kfp_gpu.local`."""
