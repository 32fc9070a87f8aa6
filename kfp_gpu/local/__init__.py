"""Pipelines run on this machine: ``kfp-gpu run --local`` with ``kfp.local`` (``run``), every
task in its image under ``--runner docker`` (``docker``), the task-log terminal (``log``) and
Ctrl-C / SIGTERM handling for the whole process tree (``interrupt``). The remote side
(Kubernetes and KFP API access) is :mod:`kfp_gpu.cluster`; neither imports the other."""
