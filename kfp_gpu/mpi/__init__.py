"""Distributed training on Kubernetes, in three rooms.

- :mod:`kfp_gpu.mpi.spec`: pure builders. One options model (:mod:`~kfp_gpu.mpi.spec.options`)
  becomes an MPI Operator ``MPIJob`` (:mod:`~kfp_gpu.mpi.spec.mpijob`) or a Kubeflow Trainer
  ``TrainJob`` (:mod:`~kfp_gpu.mpi.spec.trainjob`); no I/O, no Kubernetes client.
- :mod:`kfp_gpu.mpi.launch`: the cluster side. Create or re-attach, watch, stream the
  Launcher's log, diagnose a pending job, cancel (Kubernetes API I/O).
- :mod:`kfp_gpu.mpi.local`: the operators played in containers (Docker engine): plan the
  containers the controller would make, start them, follow their status, clean up.

``launch`` and ``local`` both build on ``spec`` and never import each other; ``spec`` imports
neither (import-linter contracts in ``pyproject.toml``).
"""
