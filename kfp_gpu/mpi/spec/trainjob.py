"""Pure builder of a Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``)
from the same :class:`kfp_gpu.mpi.spec.options.MPIJobOptions` as the MPIJob
(:func:`kfp_gpu.mpi.spec.mpijob.build`): one options model, two outputs.

The TrainJob references the ClusterTrainingRuntime ``kfp-gpu-horovod`` this project ships
(``manifests/trainer/horovod-runtime.yaml``: OpenMPI, non-root sshd on port 2222 as uid
1000, ``sshAuthMountPath: /home/mpiuser/.ssh``, ``runLauncherAsNode: true``, Memory-backed
``/dev/shm``, istio sidecar off). What the runtime holds for every job stays there; what
is per job goes where Kubeflow Trainer v2.3.0 applies it (kubeflow/trainer v2.3.0,
``pkg/apis/trainer/v1alpha1/trainjob_types.go``; ``pkg/runtime/core/trainingruntime.go``;
``pkg/runtime/framework/plugins/jobset/builder.go``; ``plugins/mpi/mpi.go``)::

    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {name, namespace, labels, annotations}
    spec:
      runtimeRef: {apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime,
                   name: kfp-gpu-horovod}
      activeDeadlineSeconds: ...              # MPIJobOptions.active_deadline_seconds
      trainer:
        image: <opts.image>                   # the launcher's image (nodes: the runtime's;
                                              #  build refuses any other, runtime_image)
        command: [mpirun, -np, N*G, ...]      # as the MPIJob Launcher runs it (RDMA:
                                              #  through worker_start's memlock check)
        env: [NCCL_*, the GPU share, opts.env, Secret env]   # every "node" container
        numNodes: N                           # workers; the launcher is node 0
        numProcPerNode: G                     # slots per node in the hostfile
        resourcesPerNode: {limits, requests}  # GPU request, RDMA resource, CPU, memory
      runtimePatches:                         # per-job pod settings, both replicated jobs
      - manager: kfp-gpu.io/mpi-options
        trainingRuntimeSpec: {template: {spec: {replicatedJobs: [
          {name: node|launcher, template: {spec: {template: {
             metadata: {labels, annotations},     # Multus, KAI gpu-fraction, queue label
             spec: {tolerations, nodeSelector, serviceAccountName, securityContext,
                    volumes: [dshm sizeLimit, PVCs, Secrets],
                    containers: [{name: node, volumeMounts: [PVCs, Secrets]}]}}}}}]}}}

Why this split: ``resourcesPerNode`` is the only per-job way to set container resources
(``ContainerPatch`` has env, volumeMounts and securityContext only), and it reaches the
"node" containers of the trainer-ancestor job (the launcher) and, with
``runLauncherAsNode``, of the ``node`` job; ``trainer.env`` likewise; env may not be
patched into "node" containers (plugins/jobset/jobset.go Validate). So with
``runLauncherAsNode`` every pod is a rank host with the same GPUs: ``numNodes = workers``
pods hold ``workers * slots`` ranks, like the MPIJob's Workers (the MPIJob's GPU-less
Launcher pod has no counterpart; ``launcher_cpu``/``launcher_memory`` do not apply).
Upstream quirk: with ``numNodes: 1`` the MPI plugin still makes one idle ``node`` pod
(``max(numNodes-1, 1)``); use ``workers >= 2`` or the MPIJob backend for one node.

Not expressible per job in v2.3.0, so refused unless left at the values the runtime has:
``schedulerName`` (no PodSpecPatch field; set it in a runtime copy, or let the scheduler's
namespace default / webhook choose), ``worker_command`` and ``ssh_auth_mount_path`` (the
runtime's sshd and mount path), ``run_as_user``/``run_as_group`` 1000 and ``fs_group``
1000 or unset (the Secret's keys are read through group 1000), ``mpi_implementation``
OpenMPI (the only one the MPI plugin supports), and the runPolicy fields the runtime
fixes: ``clean_pod_policy`` Running, ``ttl_seconds_after_finished`` 86400,
``backoff_limit`` 0, ``launcher_creation_policy`` WaitForWorkersReady (dependsOn Ready),
and any ``schedulingPolicy`` (:mod:`kfp_gpu.mpi.spec.scheduling`: gang scheduling lives on the
runtime, ``spec.podGroupPolicy``). ``active_deadline_seconds`` maps to the TrainJob's own
``spec.activeDeadlineSeconds``.

No ``IPC_LOCK`` with RDMA: nodes run as uid 1000, where it lifts no memlock limit and
only makes Pod Security ``baseline`` reject them (``mpijob.worker_may_run_as_root``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kfp_gpu.mpi.spec import claims, mpijob, ssh, volumes
from kfp_gpu.mpi.spec.network import MULTUS_ANNOTATION
from kfp_gpu.mpi.spec.options import MPIJobOptions

log = logging.getLogger(__name__)

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
KIND = "TrainJob"
PLURAL = "trainjobs"
RUNTIME_KIND = "ClusterTrainingRuntime"
RUNTIME_PLURAL = "clustertrainingruntimes"
#: The ClusterTrainingRuntime of manifests/trainer.
DEFAULT_RUNTIME = "kfp-gpu-horovod"
#: ``runtimePatches[].manager`` (a domain-prefixed path, plugins/jobset/jobset.go Validate).
PATCH_MANAGER = "kfp-gpu.io/mpi-options"
#: Replicated jobs of the runtime; both run a container named "node" (pkg/constants Node).
REPLICATED_JOBS = ("node", "launcher")
NODE_CONTAINER = "node"
#: Pod labels JobSet sets (sigs.k8s.io/jobset api/jobset/v1alpha2: JobSetNameKey,
#: ReplicatedJobNameKey); the JobSet is named after the TrainJob (plugins/jobset Build).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: Env the MPI plugin sets itself; a TrainJob may not (pkg/constants MPIReservedEnvNames).
RESERVED_ENV = ("OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args",
                "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots")
#: Option values the runtime fixes (see the module docstring): (option group, field) ->
#: (the runtime's value, where the runtime holds it).
RUNTIME_FIXED = {
    ("replicas", "mpi_implementation"): ("OpenMPI", "mlPolicy.mpi (OpenMPI only)"),
    ("replicas", "launcher_creation_policy"): ("WaitForWorkersReady",
                                               "launcher dependsOn node Ready"),
    ("ssh", "ssh_auth_mount_path"): (ssh.DEFAULT_SSH_AUTH_MOUNT_PATH,
                                     "mlPolicy.mpi.sshAuthMountPath"),
    ("ssh", "worker_command"): (ssh.DEFAULT_WORKER_COMMAND, "the node container's command"),
    ("ssh", "run_as_user"): (ssh.MPI_USER_ID, "the pods' securityContext"),
    ("ssh", "run_as_group"): (ssh.MPI_USER_ID, "the pods' securityContext"),
    ("run_policy", "clean_pod_policy"): ("Running", "JobSet successPolicy"),
    ("run_policy", "ttl_seconds_after_finished"): (86400, "template.spec.ttlSecondsAfterFinished"),
    ("run_policy", "backoff_limit"): (0, "Job backoffLimit / JobSet failurePolicy"),
}


#: What Trainer's MPI plugin adds to each TrainJob (kubeflow/trainer v2.3.0
#: ``pkg/runtime/framework/plugins/mpi/mpi.go``, names from ``pkg/constants``): an immutable
#: ``kubernetes.io/ssh-auth`` Secret ``<job>-mpi-ssh-auth`` (keys ``ssh-privatekey``, an
#: ECDSA P-521 "EC PRIVATE KEY" PEM, and ``ssh-publickey``, its authorized_keys line),
#: mounted as volume ``mpi-ssh-auth`` (defaultMode 0400; ``id_rsa`` 0640, ``id_rsa.pub`` and
#: ``authorized_keys`` 0644) at ``sshAuthMountPath`` in every "node" container; a ConfigMap
#: ``<job>-mpi-hostfile`` (key ``hostfile``, mode 0444) mounted at ``/etc/mpi`` in the
#: launcher's "node" container, with the OpenMPI variables of :func:`launcher_env`.
SSH_SECRET_SUFFIX = "-mpi-ssh-auth"
SSH_VOLUME = "mpi-ssh-auth"
SSH_SECRET_ITEMS = (("ssh-privatekey", "id_rsa", 0o640), ("ssh-publickey", "id_rsa.pub", 0o644),
                    ("ssh-publickey", "authorized_keys", 0o644))
HOSTFILE_CONFIGMAP_SUFFIX = "-mpi-hostfile"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_PATH = f"{HOSTFILE_DIR}/hostfile"


def pod_hostnames(name: str, num_nodes: int, subdomain: str = "") -> list[str]:
    """The rank hosts of TrainJob ``name`` on the ``kfp-gpu-horovod`` runtime, in hostfile
    order: the ``node`` pods ``<job>-node-0-<i>`` (``max(num_nodes - 1, 1)`` of them, with
    ``runLauncherAsNode``), then the launcher ``<job>-launcher-0-0``, each
    ``<pod hostname>.<subdomain>`` (JobSet's headless Service; default the job's name).
    Upstream: ``plugins/jobset`` IdentifyPodNetwork (``<job>-<replicatedJob>-<jobIndex>-
    <podIndex>.<subdomain>``), ``plugins/mpi`` EnforceMLPolicy (node count).

    Raises:
        ValueError: ``num_nodes < 1``.
    """
    if not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"num_nodes must be an integer >= 1, got {num_nodes!r}")
    sub = subdomain or name
    nodes = [f"{name}-node-0-{i}.{sub}" for i in range(max(num_nodes - 1, 1))]
    return [*nodes, f"{name}-launcher-0-0.{sub}"]


def hostfile(name: str, num_nodes: int, slots: int, subdomain: str = "") -> str:
    """The OpenMPI hostfile the MPI plugin writes (``plugins/mpi`` buildHostFileConfigMap):
    one ``<host> slots=<numProcPerNode>`` line per :func:`pod_hostnames` entry."""
    return "".join(f"{h} slots={slots}\n" for h in pod_hostnames(name, num_nodes, subdomain))


def launcher_env(slots: int) -> dict[str, str]:
    """The env the MPI plugin sets on the launcher's "node" container (OpenMPI; the names
    of :data:`RESERVED_ENV`)."""
    return {"OMPI_MCA_orte_default_hostfile": HOSTFILE_PATH,
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_set_default_slots": str(slots),
            "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}


def launcher_selector(name: str) -> str:
    """Label selector of the launcher pod of TrainJob ``name`` (JobSet labels)."""
    return f"{JOBSET_NAME_LABEL}={name},{REPLICATED_JOB_LABEL}=launcher"


def check_options(opts: MPIJobOptions) -> MPIJobOptions:
    """``opts.validate()`` plus what a TrainJob on the ``kfp-gpu-horovod`` runtime can carry.

    Raises:
        ValueError: naming each option the TrainJob cannot express and the accepted value.
    """
    opts.validate()
    bad = []
    for (group, key), (accepted, where) in RUNTIME_FIXED.items():
        value = getattr(getattr(opts, group), key)
        if (tuple(value) if key == "worker_command" else value) != accepted:
            bad.append(f"{key}={value!r} (accepted: {accepted!r}; fixed by the runtime's "
                       f"{where})")
    if opts.ssh.fs_group not in (None, ssh.MPI_USER_ID):
        bad.append(f"fs_group={opts.ssh.fs_group!r} (accepted: None or {ssh.MPI_USER_ID}: "
                   "sshd reads the Secret's keys through group 1000)")
    frag = opts.gpu_request().pod_fragment()
    scheduler = opts.placement.scheduler_name or frag.get("schedulerName", "")
    if scheduler:
        bad.append(f"schedulerName {scheduler!r} (Trainer v2.3 runtimePatches cannot set it: "
                   "use a runtime copy that sets it, or the scheduler's namespace default)")
    if opts.run_policy.scheduling().is_set():
        bad.append(f"schedulingPolicy {opts.run_policy.scheduling().to_spec()} (Trainer v2.3 gang-schedules "
                   "through the runtime's spec.podGroupPolicy, coscheduling or volcano; "
                   "runtimePatches cannot set it: use a runtime copy with podGroupPolicy)")
    reserved = sorted(set(mpijob.rank_env(opts)) & set(RESERVED_ENV))
    if reserved:
        bad.append(f"env {reserved} (set by the Trainer's MPI plugin itself)")
    if bad:
        raise ValueError("options not expressible as a TrainJob on the kfp-gpu-horovod "
                         "ClusterTrainingRuntime (use backend 'mpijob'): " + "; ".join(bad))
    return opts


def resources_per_node(opts: MPIJobOptions) -> dict:
    """``trainer.resourcesPerNode``: exactly the MPIJob Worker's container resources (the
    GPU request's, requests == limits for extended resources; CPU/memory; the RDMA
    resource when ``rdma``; ``claims`` for ``dra``: :mod:`kfp_gpu.mpi.spec.claims`)."""
    return mpijob._worker_resources(opts, opts.gpu_request().pod_fragment())


def _pod_patch(opts: MPIJobOptions) -> dict:
    """The pod template patch both replicated jobs get (metadata + PodSpecPatch)."""
    frag = opts.gpu_request().pod_fragment(container="node")  # KAI: the GPU container
    place = opts.placement
    annotations = dict(frag["annotations"])
    if opts.network.multus_networks:
        annotations[MULTUS_ANNOTATION] = opts.network.multus_networks
    spec: dict[str, Any] = {}
    tolerations = mpijob._dedupe([*frag["tolerations"], *(dict(t) for t in place.tolerations)])
    if tolerations:
        spec["tolerations"] = tolerations
    selector = {**frag["nodeSelector"], **place.node_selector}
    if selector:
        spec["nodeSelector"] = dict(sorted(selector.items()))
    if place.service_account:
        spec["serviceAccountName"] = place.service_account
    pod_volumes = [v.volume() for v in place.volumes]
    pod_volumes += volumes.secret_volumes(place.secret_volumes)
    if opts.resources.shm_size:  # merged by name into the runtime's dshm emptyDir
        pod_volumes.insert(0, {"name": "dshm", "emptyDir": {
            "medium": "Memory", "sizeLimit": opts.resources.shm_size}})
    if pod_volumes:
        spec["volumes"] = mpijob._dedupe(pod_volumes)
    container: dict[str, Any] = {"name": NODE_CONTAINER, "volumeMounts": [
        v.volume_mount() for v in (*place.volumes, *place.secret_volumes)]}
    if container["volumeMounts"]:
        spec["containers"] = [container]
    meta = mpijob._meta(frag["labels"], annotations)
    return {k: v for k, v in (("metadata", meta), ("spec", spec)) if v}


def runtime_patches(opts: MPIJobOptions) -> list[dict]:
    """``spec.runtimePatches``: one entry (manager :data:`PATCH_MANAGER`) patching the pod
    template of both replicated jobs; empty when there is nothing per job."""
    pod = _pod_patch(opts)
    if not pod:
        return []
    jobs = [{"name": n, "template": {"spec": {"template": pod}}} for n in REPLICATED_JOBS]
    return [{"manager": PATCH_MANAGER,
             "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}]


def build(opts: MPIJobOptions, runtime: str = DEFAULT_RUNTIME, *,
          runtime_image: str | None = None) -> dict:
    """The TrainJob for ``opts`` as a JSON-ready ``dict`` (see the module docstring), built
    with the published Trainer API models (``kubeflow_trainer_api``, PyPI
    ``kubeflow-trainer-api`` 2.3.0). Deterministic.

    Args:
        opts: the MPIJob options (``workers`` -> ``numNodes``, :meth:`slots` ->
            ``numProcPerNode``; ``mpirun -np workers*slots``).
        runtime: name of the ClusterTrainingRuntime (default :data:`DEFAULT_RUNTIME`; a ``dra``
            request: :data:`kfp_gpu.mpi.spec.claims.DRA_RUNTIME`, whose pods claim the GPUs).
        runtime_image: the image the runtime's ``node`` replicated job runs (for
            ``kfp-gpu-horovod``: the Horovod image of the compile's
            :class:`kfp_gpu.release.images.ImageSet`, the one ``kfp-gpu compile -o DIR``
            writes into DIR/manifests/trainer; the component passes its compiled
            ``runtime_image``). ``opts.image`` must equal it (:func:`check_image`). None:
            not checked -- the caller vouches that the runtime runs ``opts.image`` (a
            runtime it wrote itself, as the local runner's tests do).

    Raises:
        ValueError: from :func:`check_options`; from :func:`check_image` when ``opts.image``
            differs from ``runtime_image``.
    """
    from kubeflow_trainer_api import models as m

    check_options(opts)
    runtime = claims.runtime_for(opts, runtime, DEFAULT_RUNTIME)
    if runtime_image is not None:
        check_image(opts.image, runtime_image, runtime)
    if opts.replicas.workers == 1:
        log.warning("TrainJob %s with workers=1: Trainer v2.3 still creates one 'node' pod "
                    "besides the launcher (max(numNodes-1, 1)); it holds its GPUs idle. Use "
                    "workers >= 2 or backend 'mpijob' for one node.", opts.name)
    patches = runtime_patches(opts)
    resources = resources_per_node(opts)
    env = [*mpijob._env_list(mpijob.rank_env(opts)), *mpijob.secret_env(opts)]
    workers = opts.replicas.workers
    trainer = m.TrainerV1alpha1Trainer(
        image=opts.image,
        command=launcher_command(opts),
        env=[_model(m.IoK8sApiCoreV1EnvVar, e) for e in env],
        num_nodes=workers, num_proc_per_node=opts.slots(),
        resources_per_node=_model(m.IoK8sApiCoreV1ResourceRequirements, resources))
    spec = m.TrainerV1alpha1TrainJobSpec(
        runtime_ref=m.TrainerV1alpha1RuntimeRef(api_group=GROUP, kind=RUNTIME_KIND,
                                                name=runtime),
        trainer=trainer,
        runtime_patches=[_model(m.TrainerV1alpha1RuntimePatch, p) for p in patches] or None,
        active_deadline_seconds=opts.run_policy.active_deadline_seconds,
        # Kueue's TrainJob integration admits it by clearing spec.suspend (kubernetes-sigs/
        # kueue pkg/controller/jobs/trainjob); the queue label comes with job_metadata.
        suspend=True if opts.run_policy.kueue_queue else None)
    meta = claims.annotated(mpijob.job_metadata(opts), opts, claims.DRA_RUNTIME_TEMPLATE)
    job = m.TrainerV1alpha1TrainJob(api_version=API_VERSION, kind=KIND, spec=spec,
                                    metadata=m.IoK8sApimachineryPkgApisMetaV1ObjectMeta(**meta))
    return job.to_dict()


def launcher_command(opts: MPIJobOptions) -> list[str]:
    """``trainer.command``: as the MPIJob Launcher, :mod:`kfp_gpu.training.launcher_start`
    then ``mpirun``; with RDMA mpirun runs through :mod:`kfp_gpu.training.worker_start`, as
    this launcher pod is node 0 and hosts ranks, so it needs the nodes' memlock check.
    ``dependsOn`` (manifests/trainer) waits for the nodes' Ready, but mpirun takes its own
    hostfile name for a remote host until the cluster DNS resolves it (``ssh: Could not
    resolve hostname <job>-launcher-0-0.<job>`` on a real node): launcher_start waits."""
    cmd = mpijob.mpirun_line(opts)
    if opts.network.rdma:
        cmd = [ssh.IMAGE_PYTHON, *ssh.WORKER_START, *cmd]
    return [ssh.IMAGE_PYTHON, *mpijob.LAUNCHER_START, "--port", str(ssh.SSH_PORT), "--", *cmd]


def runtime_node_image(runtime: Mapping) -> str | None:
    """The image of the ``node`` container of the runtime's ``node`` replicated job (what
    every rank host but the launcher runs), or None when the runtime has none."""
    template = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    for rjob in template.get("replicatedJobs") or []:
        if rjob.get("name") != NODE_CONTAINER:
            continue
        pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {})
        for c in (pod.get("spec") or {}).get("containers") or []:
            if c.get("name") == NODE_CONTAINER:
                return c.get("image")
    return None


def check_image(image: str, runtime_image: str, runtime: str = DEFAULT_RUNTIME) -> None:
    """Refuse a TrainJob image other than its runtime's node image.

    Kubeflow Trainer v2.3.0 gives ``trainer.image`` to the ``node`` container of the
    trainer-ancestor replicated job only: kubeflow/trainer v2.3.0
    ``pkg/runtime/framework/plugins/jobset/builder.go`` ``Trainer()`` (l. 113-139) sets
    the image (l. 129-130) only where the job's ``trainer.kubeflow.org/trainjob-ancestor-
    step`` label is ``trainer`` (l. 120) -- on ``kfp-gpu-horovod`` the ``launcher`` job --
    while the ``node`` job keeps the runtime's image (the MPI plugin,
    ``plugins/mpi/mpi.go``, sets no image), so the launcher and the other ranks would run
    different code (kubeflow/trainer issue 2825; fix PR 4050 open).

    Raises:
        ValueError: ``image != runtime_image``, naming the fixes: the runtime installed with
            that image (``kfp-gpu compile --registry R -o DIR`` and ``kubectl apply -k
            DIR/manifests/trainer``, or a kustomize ``images:`` entry in manifests/trainer),
            a runtime copy with that image, or backend ``mpijob``.
    """
    if image == runtime_image:
        return
    repo = runtime_image.rsplit("@", 1)[0]
    if repo.rfind(":") > repo.rfind("/"):
        repo = repo[:repo.rfind(":")]
    raise ValueError(
        f"TrainJob image {image!r} differs from the node image {runtime_image!r} of "
        f"ClusterTrainingRuntime {runtime!r}: Kubeflow Trainer v2.3 gives trainer.image to "
        "the launcher only (plugins/jobset/builder.go Trainer()), so the launcher and the "
        "ranks would run different code (kubeflow/trainer issue 2825). Fix: install the "
        "runtime with that image -- `kfp-gpu compile --registry R -o DIR` then `kubectl "
        "apply -k DIR/manifests/trainer`, or in manifests/trainer `kustomize edit set image "
        f"{repo}={image}` -- and set runtime_image to it; or use a runtime copy with that "
        "image (its name as the runtime); or backend 'mpijob'")


def check_runtime_image(job: Mapping, runtime: Mapping) -> None:
    """:func:`check_image` for a built TrainJob and the runtime object it names (e.g. the
    one read from the cluster): refuse a ``trainer.image`` other than the runtime's node
    image (:func:`runtime_node_image`).

    Raises:
        ValueError: the two images differ, with the fixes.
    """
    wanted = ((job.get("spec") or {}).get("trainer") or {}).get("image")
    have = runtime_node_image(runtime)
    if not wanted or have is None:
        return
    check_image(wanted, have, (runtime.get("metadata") or {}).get("name", DEFAULT_RUNTIME))


def _model(cls, data: dict):
    """``cls.from_dict(data)``, checked to keep every field (the generated ``from_dict``
    silently drops keys it does not know)."""
    model = cls.from_dict(data)
    if model.to_dict() != data:
        raise AssertionError(f"{cls.__name__} does not carry {data!r}")
    return model


def to_yaml(job: Mapping) -> str:
    """``job`` as YAML (keys in insertion order), for goldens and ``kubectl apply``."""
    return mpijob.to_yaml(job)
