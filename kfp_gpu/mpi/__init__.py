"""Distributed training on Kubernetes: MPIJob and Kubeflow Trainer TrainJob spec builders
(pure, one options model: :mod:`~kfp_gpu.mpi.mpijob`, :mod:`~kfp_gpu.mpi.trainjob`), the
backends table (:mod:`~kfp_gpu.mpi.backends`), mpirun command line, and the launcher that
creates/re-attaches, watches, streams logs and cancels either kind (Kubernetes I/O)."""
