"""Pure builder of a ``kubeflow.org/v2beta1`` MPIJob (Kubeflow MPI Operator).

No I/O: :func:`build` turns an :class:`~kfp_gpu.mpi.spec.options.MPIJobOptions` into a plain ``dict`` that the
launcher (:mod:`kfp_gpu.mpi.launch.launcher`) posts to the Kubernetes API.

Shape of the result (field names from the upstream Go types,
``github.com/kubeflow/mpi-operator`` ``pkg/apis/kubeflow/v2beta1/types.go``; the
controller-side rules from ``pkg/apis/kubeflow/validation/validation.go``)::

    apiVersion: kubeflow.org/v2beta1
    kind: MPIJob
    metadata: {name, namespace, labels, annotations}
    spec:
      slotsPerWorker: G                # MPI slots per Worker pod = whole GPUs per pod
      launcherCreationPolicy: WaitForWorkersReady
      mpiImplementation: OpenMPI
      sshAuthMountPath: /home/mpiuser/.ssh   # non-root, as the project's horovod image
      runPolicy: {cleanPodPolicy, ttlSecondsAfterFinished, backoffLimit,
                  activeDeadlineSeconds, suspend,          # the last two when set
                  schedulingPolicy: {minAvailable: N, ...}}  # N = Workers (gang safety)
      mpiReplicaSpecs:
        Launcher: {replicas: 1, restartPolicy: OnFailure, template: <PodTemplateSpec>}
        Worker:   {replicas: N, restartPolicy: Never,     template: <PodTemplateSpec>}

The Launcher runs (:mod:`kfp_gpu.mpi.spec.mpirun`) ``mpirun -np N*G -bind-to none -map-by slot -x ...`` (the mpirun form
of the Horovod docs, "Run Horovod with Open MPI"); the operator mounts the hostfile and
sets ``OMPI_MCA_orte_default_hostfile`` itself. Workers run ``sshd`` and carry the GPU
request (from :mod:`kfp_gpu.gpu`), the RDMA extended resource (``IPC_LOCK`` if root), a
Memory-backed ``/dev/shm``, the NCCL settings and the shared PVCs of
``Placement.volumes`` (:class:`~kfp_gpu.mpi.spec.volumes.PvcMount`: pod ``volumes[].persistentVolumeClaim`` +
container ``volumeMounts``), e.g. the ``work_dir`` rank 0 writes the model and metrics to.
The Secrets of ``Placement.secret_volumes`` (:class:`~kfp_gpu.mpi.spec.volumes.SecretMount`:
pod ``volumes[].secret`` + a read-only mount) go on the Launcher and on the Workers at the
same path, so a file an env var names (``GOOGLE_APPLICATION_CREDENTIALS``, forwarded with
``-x``) exists wherever a rank or mpirun reads it.

Defaults fit the project's ``horovod`` image (``images/horovod/Dockerfile``), which follows
the MPI Operator's non-root base image (``build/base/Dockerfile`` and the
``examples/v2beta1/pi`` MPIJob of kubeflow/mpi-operator): user ``mpiuser`` (uid/gid 1000,
home ``/home/mpiuser``), so ``sshAuthMountPath: /home/mpiuser/.ssh``, pods with
``runAsUser``/``runAsGroup`` 1000, and Workers running
``/usr/sbin/sshd -De -f /home/mpiuser/.sshd_config`` (port 2222; host keys: one the Worker makes at start, then the
operator's ``id_rsa``), started through :mod:`kfp_gpu.training.worker_start` (device env for the
ranks, RDMA memlock check: :data:`kfp_gpu.mpi.spec.ssh.DEFAULT_WORKER_COMMAND`). The image's ``/etc/ssh/ssh_config`` sets ``Port 2222`` for the ssh client, so
mpirun needs no ``-mca plm_rsh_args "-p 2222"``; images without that line need it (or an
ssh config). For a root image use ``ssh=kfp_gpu.mpi.spec.options.ROOT_SSH``.

Upstream names used here:
- ``rdma/rdma_shared_device_a``: the resource name of the Mellanox k8s-rdma-shared-dev-plugin
  sample config (NVIDIA Network Operator); ``rdma/hca_shared_devices_a``: the name in the
  Network Operator's ``NicClusterPolicy`` examples. Any ``rdma/<name>`` is accepted.
- ``k8s.v1.cni.cncf.io/networks``: the Multus pod annotation selecting secondary networks
  (NetworkAttachmentDefinitions), e.g. an SR-IOV or macvlan network on the RDMA NIC.
- ``NCCL_IB_HCA``, ``NCCL_NET_GDR_LEVEL``, ``NCCL_SOCKET_IFNAME``, ``NCCL_DEBUG``: NCCL
  environment variables (NCCL user guide, "Environment Variables").
- ``IPC_LOCK``: Linux capability that lifts ``RLIMIT_MEMLOCK`` for pinning (registering)
  memory for RDMA verbs; added to Workers that may run as root (see
  :func:`worker_may_run_as_root`).
- labels ``training.kubeflow.org/job-name`` / ``training.kubeflow.org/job-role``: set by the
  operator on the pods it creates (``pkg/apis/kubeflow/v2beta1/constants.go``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kfp_gpu.mpi.spec import claims, crd, scheduling, ssh, volumes
from kfp_gpu.mpi.spec.mpirun import mpirun_command
from kfp_gpu.mpi.spec.network import ISTIO_INJECT_ANNOTATION, MULTUS_ANNOTATION
from kfp_gpu.mpi.spec.options import MPIJobOptions

#: Module that starts a queued job's Launcher (waits for the Workers' sshd, then mpirun).
LAUNCHER_START = ("-m", "kfp_gpu.training.launcher_start")


def rank_env(opts: MPIJobOptions) -> dict[str, str]:
    """All environment the ranks get: NCCL/Horovod settings, what the Worker command reads
    (``KFP_GPU_RDMA``), the GPU request's env (e.g. its share variable), then ``opts.env``
    (which wins)."""
    env = {**opts.network.nccl_env(), **opts.network.worker_env()}
    for e in opts.gpu_request().pod_fragment()["env"]:
        env[e["name"]] = str(e["value"])
    env.update(opts.env)
    return env


def _env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in env.items()]


def secret_env(opts: MPIJobOptions) -> list[dict]:
    """``opts.placement.secret_env`` as container ``env`` entries (``valueFrom.secretKeyRef``, plain
    dict copies), after the :func:`rank_env` entries on the Launcher and the Workers."""
    return [{"name": e["name"], "valueFrom": {"secretKeyRef": dict(
        e["valueFrom"]["secretKeyRef"])}} for e in opts.placement.secret_env]


def forwarded_env(opts: MPIJobOptions) -> list[str]:
    """The names ``mpirun -x`` forwards: :func:`rank_env`'s, then the Secret env's (ranks
    started over ssh see only what mpirun forwards from the Launcher)."""
    return [*rank_env(opts), *(e["name"] for e in opts.placement.secret_env)]


def _resources(limits: dict, requests: dict) -> dict:
    out = {}
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    if requests:
        out["requests"] = dict(sorted(requests.items()))
    return out


def _worker_resources(opts: MPIJobOptions, frag: dict) -> dict:
    """Worker ``resources``: the GPU request's, CPU/memory, the RDMA resource, and for a
    ``dra`` request the pod's claim (``claims``, :mod:`kfp_gpu.mpi.spec.claims`)."""
    limits = dict(frag["resources"]["limits"])
    requests = dict(frag["resources"]["requests"])
    res = opts.resources
    for key, value, limit in (("cpu", res.worker_cpu, res.worker_cpu_limit),
                              ("memory", res.worker_memory, res.worker_memory_limit)):
        if value or limit:
            limits.setdefault(key, limit or value)
            requests.setdefault(key, value or limit)
    net = opts.network
    if net.rdma:
        # Extended resources: request must equal limit (Kubernetes rule).
        limits[net.rdma_resource] = str(net.rdma_count)
        requests[net.rdma_resource] = str(net.rdma_count)
    out = _resources(limits, requests)
    if claims.is_dra(opts):
        out["claims"] = claims.container_claims(opts)
    return out


def _worker_container(opts: MPIJobOptions, frag: dict) -> dict:
    place = opts.placement
    container: dict[str, Any] = {
        "name": "worker",
        "image": opts.image,
        "command": list(opts.ssh.worker_command),
        "env": _env_list(rank_env(opts)) + secret_env(opts),
        "resources": _worker_resources(opts, frag),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                         *(v.volume_mount() for v in place.volumes),
                         *(v.volume_mount() for v in place.secret_volumes)],
    }
    if opts.network.rdma and worker_may_run_as_root(opts):
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    container["readinessProbe"] = sshd_readiness_probe()
    return container


def sshd_readiness_probe() -> dict:
    """The Workers' readiness probe: a TCP connect to sshd's port
    (:data:`kfp_gpu.mpi.spec.ssh.SSH_PORT`; the project image's sshd listens there for
    ``mpiuser`` and, with :data:`~kfp_gpu.mpi.spec.ssh.ROOT_SSH`, as root).

    ``WaitForWorkersReady`` creates the Launcher once every Worker pod is Ready
    (mpi-operator v0.8.2 ``pkg/controller/mpi_job_controller.go`` ``countReadyWorkerPods``:
    the pod's ``Ready`` condition); without a probe a pod is Ready when its container has
    started, before sshd listens, and the Launcher's first ssh can be refused.
    """
    return {"tcpSocket": {"port": ssh.SSH_PORT}, "periodSeconds": 2, "failureThreshold": 3,
            "timeoutSeconds": 1}


def worker_may_run_as_root(opts: MPIJobOptions) -> bool:
    """True when the Worker pods may run as root: ``run_as_user`` 0, or unset (the image's
    user decides). Only then is ``IPC_LOCK`` added with RDMA: a capability in
    ``securityContext.capabilities.add`` reaches the effective set of root processes only:
    the kubelet passes no ambient capabilities (kubernetes/kubernetes ``pkg/kubelet/
    kuberuntime/security_context_others.go`` ``convertToRuntimeCapabilities`` fills the CRI
    ``Capability``'s add/drop lists only), and at ``execve`` a non-root process without file
    capabilities keeps only its ambient set (capabilities(7), "Transformation of
    capabilities during execve()"). Non-root ranks get the container runtime's
    ``RLIMIT_MEMLOCK``; IPC_LOCK would only make Pod Security ``baseline`` reject them."""
    return opts.ssh.run_as_user in (None, 0)


def worker_template(opts: MPIJobOptions) -> dict:
    """PodTemplateSpec of a Worker: GPU request, RDMA (IPC_LOCK if root), /dev/shm, NCCL env,
    the PVCs of ``opts.placement.volumes`` (one pod volume per claim, one mount each) and
    the Secrets of ``opts.placement.secret_volumes`` (``volumes.secret_volumes``); a
    ``dra`` request: ``resourceClaims`` naming the job's ResourceClaimTemplate
    ``<job>-gpu`` (:mod:`kfp_gpu.mpi.spec.claims`)."""
    frag = opts.gpu_request().pod_fragment(container="worker")  # KAI: the GPU container
    place = opts.placement
    shm: dict[str, str] = {"medium": "Memory"}
    if opts.resources.shm_size:
        shm["sizeLimit"] = opts.resources.shm_size
    spec: dict[str, Any] = {
        "containers": [_worker_container(opts, frag)],
        "volumes": [{"name": "dshm", "emptyDir": shm},
                    *_dedupe([v.volume() for v in place.volumes]),
                    *volumes.secret_volumes(place.secret_volumes)],
    }
    tolerations = _dedupe([*frag["tolerations"], *(dict(t) for t in place.tolerations)])
    if tolerations:
        spec["tolerations"] = tolerations
    selector = {**frag["nodeSelector"], **place.node_selector}
    if selector:
        spec["nodeSelector"] = dict(sorted(selector.items()))
    scheduler = place.scheduler_name or frag.get("schedulerName", "")
    if scheduler:
        spec["schedulerName"] = scheduler
    claims.wire_pod(spec, opts, claims.template_name(opts.name))  # dra: the Worker's claim
    _pod_identity(opts, spec)
    annotations = {**_mesh_annotations(opts), **frag["annotations"]}
    if opts.network.multus_networks:
        annotations[MULTUS_ANNOTATION] = opts.network.multus_networks
    labels = {**frag["labels"], **mesh_labels(opts)}
    return {"metadata": _meta(labels, annotations), "spec": spec}


def _mesh_annotations(opts: MPIJobOptions) -> dict[str, str]:
    """``sidecar.istio.io/inject: "false"`` unless ``opts.network.istio_sidecar``.

    Kubeflow profile namespaces are labelled ``istio-injection=enabled``
    (kubeflow/dashboard components/profile-controller controllers/profile_controller.go),
    so every pod gets an Envoy sidecar: the Launcher's pod then never completes (the
    sidecar keeps running after mpirun exits) and the Workers' sshd traffic goes through
    the mesh. The pod annotation is Istio's documented per-pod opt-out
    (istio.io "Installing the Sidecar", controlling the injection policy).
    """
    return {} if opts.network.istio_sidecar else {ISTIO_INJECT_ANNOTATION: "false"}


def mesh_labels(opts: MPIJobOptions) -> dict[str, str]:
    """The same opt-out as a pod **label**, the form current Istio documents (istio.io
    "Installing the Sidecar" > "Controlling the injection policy"; the annotation is the
    legacy form, still honoured): both are set so either Istio generation skips the pod."""
    return {} if opts.network.istio_sidecar else {ISTIO_INJECT_ANNOTATION: "false"}


def _pod_identity(opts: MPIJobOptions, spec: dict) -> None:
    """Service account and PodSecurityContext, shared by Launcher and Workers.

    Without a service account the pods get no API token (``automountServiceAccountToken:
    false``): mpirun reaches the Workers over ssh, and no rank talks to the Kubernetes API.
    """
    if opts.placement.service_account:
        spec["serviceAccountName"] = opts.placement.service_account
    else:
        spec["automountServiceAccountToken"] = False
    security = opts.ssh.pod_security_context()
    if security:
        spec["securityContext"] = security


def mpirun_line(opts: MPIJobOptions) -> list[str]:
    """The bare ``mpirun`` argv (:func:`kfp_gpu.mpi.spec.mpirun.mpirun_command`) for
    ``workers * slotsPerWorker`` ranks, forwarding the names of :func:`forwarded_env`."""
    return mpirun_command(opts.replicas.workers * opts.slots(), list(opts.program),
                          forwarded_env=forwarded_env(opts),
                          implementation=opts.replicas.mpi_implementation)


def launcher_command(opts: MPIJobOptions) -> list[str]:
    """The MPIJob Launcher's argv: :func:`mpirun_line` started through
    :mod:`kfp_gpu.training.launcher_start`, which waits until every host of the hostfile
    accepts connections on sshd's port, then execs mpirun.

    Always, not only with ``kueue_queue``: whenever an MPIJob is suspended -- by our
    ``kueue_queue``, by Kueue's webhook for a namespace default LocalQueue or
    ``manageJobsWithoutQueueName`` (kubernetes-sigs/kueue v0.19.2
    ``pkg/controller/jobframework/defaults.go`` ApplyDefaultForSuspend), or by anyone else
    -- mpi-operator v0.8.2 creates the Launcher Job before any Worker exists
    (``pkg/controller/mpi_job_controller.go`` ``syncHandler``: ``countReadyWorkerPods`` of
    no Workers equals their number, 0; kubeflow/mpi-operator issue 615), so on resume the
    Launcher and the Workers start together and mpirun would meet Workers still pulling a
    multi-GB image, failing the Launcher Job (``backoffLimit`` 0, the default) on a slow
    pull. Under ``WaitForWorkersReady`` without suspension every Worker is already Ready
    and the wait returns after one connect per Worker.
    """
    return [ssh.IMAGE_PYTHON, *LAUNCHER_START, "--port", str(ssh.SSH_PORT), "--",
            *mpirun_line(opts)]


def launcher_template(opts: MPIJobOptions) -> dict:
    """PodTemplateSpec of the Launcher: no GPU, runs :func:`launcher_command`; mounts the
    Secrets of ``opts.placement.secret_volumes`` as the Workers do (no PVCs: it only runs
    mpirun)."""
    env = rank_env(opts)
    res = opts.resources
    limits = {k: v for k, v in (("cpu", res.launcher_cpu), ("memory", res.launcher_memory)) if v}
    container = {
        "name": "launcher",
        "image": opts.image,
        "command": launcher_command(opts),
        "env": _env_list(env) + secret_env(opts),
        "resources": _resources(limits, dict(limits)),
    }
    spec: dict[str, Any] = {"containers": [container]}
    if opts.placement.secret_volumes:
        container["volumeMounts"] = [v.volume_mount() for v in opts.placement.secret_volumes]
        spec["volumes"] = volumes.secret_volumes(opts.placement.secret_volumes)
    _pod_identity(opts, spec)
    # No Multus network here: only the Workers' NCCL traffic uses the RDMA network; the
    # Launcher reaches the Workers' sshd over the pod network (their headless Service).
    return {"metadata": _meta(mesh_labels(opts), _mesh_annotations(opts)), "spec": spec}


def _meta(labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict:
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def _dedupe(items: list[dict]) -> list[dict]:
    seen, out = set(), []
    for item in items:
        key = tuple(sorted((k, str(v)) for k, v in item.items()))
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def job_metadata(opts: MPIJobOptions) -> dict:
    """``metadata`` of the job object: name, namespace, the managed-by label, extra labels
    and annotations, and the run/task provenance annotations (:mod:`kfp_gpu.mpi.spec.crd`)."""
    meta = opts.metadata
    labels = {crd.MANAGED_BY_LABEL: crd.MANAGED_BY, **meta.labels}
    if opts.run_policy.kueue_queue:
        labels[crd.KUEUE_QUEUE_LABEL] = opts.run_policy.kueue_queue
    annotations = dict(meta.annotations)
    if meta.run_id:
        annotations[crd.RUN_ID_ANNOTATION] = meta.run_id
    if meta.task_name:
        annotations[crd.TASK_ANNOTATION] = meta.task_name
    out: dict[str, Any] = {"name": opts.name, "namespace": opts.namespace,
                           "labels": dict(sorted(labels.items()))}
    if annotations:
        out["annotations"] = dict(sorted(annotations.items()))
    return out


def run_policy(opts: MPIJobOptions) -> dict:
    """``spec.runPolicy``: the options' (:meth:`~kfp_gpu.mpi.spec.options.RunPolicy.to_spec`)
    with ``schedulingPolicy.minAvailable`` defaulted to the Worker count under
    ``WaitForWorkersReady`` (:func:`kfp_gpu.mpi.spec.scheduling.default_min_available`).

    Raises:
        ValueError: a ``min_available`` above the Worker count under ``WaitForWorkersReady``
            (the gang could never start: the Launcher is created after the Workers).
    """
    out = opts.run_policy.to_spec()
    workers, creation = opts.replicas.workers, opts.replicas.launcher_creation_policy
    given = opts.run_policy.min_available
    if given is not None and creation == "WaitForWorkersReady" and given > workers:
        raise ValueError(f"min_available {given} > workers {workers}: with "
                         "launcherCreationPolicy WaitForWorkersReady the Launcher is created "
                         "only after the Workers run, so a gang of more than the Workers "
                         "never starts (kubeflow/mpi-operator issue 608); accepted: "
                         f"1..{workers}")
    default = scheduling.default_min_available(workers, creation)
    if given is None and default is not None:
        out["schedulingPolicy"] = {"minAvailable": default, **out.get("schedulingPolicy", {})}
    return out


def build(opts: MPIJobOptions) -> dict:
    """The MPIJob for ``opts`` as a JSON-ready ``dict`` (see the module docstring).

    ``spec.slotsPerWorker`` = :meth:`MPIJobOptions.slots`; ``mpirun -np`` =
    ``workers * slotsPerWorker``. Deterministic: the same options give an equal dict.

    Raises:
        ValueError: from :meth:`MPIJobOptions.validate`.
    """
    opts.validate()
    return {
        "apiVersion": crd.API_VERSION,
        "kind": crd.KIND,
        "metadata": claims.annotated(job_metadata(opts), opts, claims.template_name(opts.name)),
        "spec": {
            "slotsPerWorker": opts.slots(),
            "launcherCreationPolicy": opts.replicas.launcher_creation_policy,
            "mpiImplementation": opts.replicas.mpi_implementation,
            "sshAuthMountPath": opts.ssh.ssh_auth_mount_path,
            "runPolicy": run_policy(opts),
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": launcher_template(opts)},
                "Worker": {"replicas": opts.replicas.workers, "restartPolicy": "Never",
                           "template": worker_template(opts)},
            },
        },
    }


def to_yaml(job: Mapping) -> str:
    """``job`` as YAML (keys in insertion order), for goldens and ``kubectl apply``."""
    import yaml

    return yaml.safe_dump(dict(job), sort_keys=False, default_flow_style=False)
