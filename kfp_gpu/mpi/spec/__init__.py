"""Pure builders of the distributed job: no I/O, no Kubernetes client import.

Read in order:

1. :mod:`.options`: :class:`~.options.MPIJobOptions`, the one options model, built from small
   groups (:mod:`.ssh`, :mod:`.network`, :mod:`.volumes`, :mod:`.scheduling`) and validated
   with Kubernetes' name rules (:mod:`.names`, :mod:`.checks`).
2. :mod:`.mpirun`: the Launcher's one ``mpirun`` command line.
3. :mod:`.mpijob`: options -> ``kubeflow.org/v2beta1`` MPIJob (mpi-operator); the Launcher and
   Worker pod templates live here.
4. :mod:`.trainjob`: the same options -> ``trainer.kubeflow.org/v1alpha1`` TrainJob against
   the project's ClusterTrainingRuntime (:mod:`.strategic_merge` for runtime patches).
5. :mod:`.backends` and :mod:`.crd`: what the launcher needs to know about each job kind
   (API names, conditions -> phase, where the Launcher's log is).
"""
