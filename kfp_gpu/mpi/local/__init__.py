"""The operators played in containers (a Docker engine), for tests and ``run-local``.

Read in order (plan -> start -> status -> clean up):

1. :mod:`.plan` (MPIJob, as mpi-operator's controller builds its pods) and
   :mod:`.plan_trainjob` (TrainJob + ClusterTrainingRuntime, as Kubeflow Trainer's MPI
   plugin and JobSet do): pure planners from a manifest to :mod:`.model`'s container specs.
2. :mod:`.workspace`: the files the controller would mount (hostfile, ssh Secret).
3. :mod:`.runner`: :class:`~.runner.LocalMPIJobRunner` starts the network and the
   containers, waits, collects the Launcher's log and exit, and removes everything.
4. :mod:`.status`: the job's status from its containers, with the operators' conditions and
   restart rules.

The ``run-local`` commands that drive this are in :mod:`kfp_gpu.cli.run_local`.
"""
