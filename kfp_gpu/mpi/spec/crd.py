"""The MPIJob API's names, in one place: group/version/kind/plural and the pod labels the
MPI Operator sets. Everything that reads or writes MPIJobs (builder, launcher, doctor,
local runner) takes them from here.

Upstream: github.com/kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1/types.go`` (kind,
version), ``pkg/apis/kubeflow/v2beta1/constants.go`` (labels), ``manifests/base/
kubeflow.org_mpijobs.yaml`` (CRD name, plural).
"""

GROUP = "kubeflow.org"
VERSION = "v2beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "MPIJob"
PLURAL = "mpijobs"
#: metadata.name of the CustomResourceDefinition.
CRD_NAME = f"{PLURAL}.{GROUP}"

#: Pod labels the MPI Operator sets (constants.go: JobNameLabel, JobRoleLabel).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

#: Labels/annotations this suite puts on the MPIJob it creates.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kfp-gpu"
RUN_ID_ANNOTATION = "kfp-gpu/pipeline-run-id"
TASK_ANNOTATION = "kfp-gpu/task-name"

#: Kueue's queue label: the LocalQueue a job is admitted through
#: (kubernetes-sigs/kueue ``pkg/controller/constants/constants.go`` ``QueueLabel``).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
