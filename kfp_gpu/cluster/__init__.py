"""Where pipelines run: Kubernetes and KFP API access, ``kfp-gpu doctor``, ``kfp-gpu submit``
and local runs with ``kfp.local``."""
