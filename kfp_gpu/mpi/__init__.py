"""Distributed training on Kubernetes: MPIJob spec builder (pure), mpirun command line, and
the launcher that creates/re-attaches, watches, streams logs and cancels (Kubernetes I/O)."""
