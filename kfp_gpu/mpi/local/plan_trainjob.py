"""Pure planning for a TrainJob with the MPI policy: (TrainJob, runtime) -> container specs.

No I/O. :func:`plan` reads a ``trainer.kubeflow.org/v1alpha1`` TrainJob (e.g. from
:func:`kfp_gpu.mpi.spec.trainjob.build`) and the ClusterTrainingRuntime / TrainingRuntime its
``runtimeRef`` names (e.g. ``manifests/trainer/horovod-runtime.yaml``) and returns the
same :class:`kfp_gpu.mpi.local.model.LocalPlan` the MPIJob planner does: what Kubeflow
Trainer and JobSet would create, as containers. :mod:`kfp_gpu.mpi.local.runner` runs it.

Upstream followed: kubeflow/trainer v2.3.0 (commit 658725b; line numbers at that tag),
and kubernetes-sigs/jobset v0.12.0 (the version Trainer v2.3.0's go.mod pins):

- ``pkg/runtime/core/trainingruntime.go`` newRuntimeInfo (l. 141-249): the
  ``runtimePatches`` are strategic-merged onto the runtime's JobSet spec, in the runtime's
  ``replicatedJobs`` order (mergeRuntimePatches l. 251-290, :mod:`kfp_gpu.mpi.spec.strategic_merge`);
  a replicated job's pod count is its ``parallelism`` (default 1), for the job labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` the runtime's ``mlPolicy.numNodes``
  (default 1); ``trainer.resourcesPerNode`` goes to the ``node`` container of that job and,
  with ``runLauncherAsNode``, of the ``node`` job (dropped here with a note).
- ``pkg/runtime/framework/plugins/mpi/mpi.go`` EnforceMLPolicy (l. 111-233): the ``node``
  job gets ``trainer.numNodes`` pods, ``max(numNodes - 1, 1)`` with ``runLauncherAsNode``
  (l. 117-126); slots = ``trainer.numProcPerNode``, else the runtime's, else (when that is
  1) the GPUs per node (l. 128-139); the Secret ``<J>-mpi-ssh-auth`` (``id_rsa`` 0640,
  ``id_rsa.pub`` and ``authorized_keys`` 0644) at ``sshAuthMountPath`` in every container
  named ``node`` of the ``node`` and ``launcher`` jobs; the ConfigMap ``<J>-mpi-hostfile``
  (``hostfile`` only, 0444) at ``/etc/mpi`` and the ``OMPI_MCA_*`` env in the launcher's;
  buildHostFileConfigMap (l. 316-342, isNode l. 344-346): ``<endpoint> slots=<S>`` for each
  pod of the ``node`` job and, with ``runLauncherAsNode``, the launcher job, in runtime
  order. ``pkg/constants/constants.go``: names, modes (l. 68-92, 132-187).
- ``pkg/runtime/framework/plugins/jobset/jobset.go`` IdentifyPodNetwork (l. 273-300):
  endpoints ``<J>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>``, the subdomain
  ``spec.network.subdomain`` or the TrainJob name (JobSet names child Jobs
  ``<J>-<replicatedJob>-<jobIndex>``, Indexed Job pods get ``<job>-<index>`` as hostname,
  jobset ``pkg/controllers/jobset_controller.go`` l. 940-956). ``plugins/jobset/builder.go``
  Trainer (l. 113-158): ``trainer.image``/``command``/``args`` replace those of the
  ``node`` container of the trainer-ancestor job only; ``trainer.env`` is upserted into
  it and, with ``runLauncherAsNode``, into the ``node`` job's.
- The launcher's ``dependsOn: [{name: node, status: Ready}]`` (JobSet
  ``pkg/controllers/depends_on.go``) -> ``WaitForWorkersReady``; a finished JobSet
  deletes its active child Jobs (jobset_controller.go l. 162-166) -> cleanPodPolicy
  ``Running``; the launcher Job's ``backoffLimit`` (batch/v1 default 6) -> its retries.

Not reproduced (docs/local-mpijob.md): resources, schedulers, PodGroups, probes (readiness =
listening on a TCP port), JobSet restarts (``failurePolicy.maxRestarts`` > 0: the first
failure fails the job, with a note), suspend, initializer jobs, ``$(VAR)`` expansion.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass

from kfp_gpu.mpi.local import plan as lp
from kfp_gpu.mpi.local.model import (
    ContainerSpec,
    Controller,
    LocalPlan,
    Mount,
    Resources,
    RunPolicy,
    SshSecret,
)
from kfp_gpu.mpi.spec import strategic_merge, trainjob

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"  # LabelTrainJobAncestor
ANCESTOR_TRAINER = "trainer"  # AncestorTrainer
NODE, LAUNCHER = "node", "launcher"  # constants.Node, constants.Launcher
#: MPIMLPolicySource defaults (trainingruntime_types.go kubebuilder:default).
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
#: batch/v1 Job ``backoffLimit`` default.
DEFAULT_BACKOFF_LIMIT = 6


@dataclass(frozen=True)
class _Ctx:
    """What every pod of the job needs to know."""

    name: str
    namespace: str
    subdomain: str
    slots: int
    ssh_path: str
    as_node: bool
    trainer: Mapping


def check_objects(job: Mapping, runtime: Mapping) -> dict:
    """Validate the pair; returns the runtime's ``mlPolicy.mpi`` with its defaults.

    Raises:
        ValueError: not a v1alpha1 TrainJob / (Cluster)TrainingRuntime, a ``runtimeRef``
            naming another runtime, no ``mlPolicy.mpi``, an MPI implementation other than
            OpenMPI (the only one plugins/mpi supports, mpi.go l. 208-227).
    """
    if job.get("apiVersion") != trainjob.API_VERSION or job.get("kind") != trainjob.KIND:
        raise ValueError(f"not a {trainjob.API_VERSION} TrainJob: apiVersion "
                         f"{job.get('apiVersion')!r}, kind {job.get('kind')!r}")
    if runtime.get("apiVersion") != trainjob.API_VERSION or runtime.get("kind") not in (
            RUNTIME_KINDS):
        raise ValueError(f"not a {trainjob.API_VERSION} runtime: kind {runtime.get('kind')!r}; "
                         f"accepted: {', '.join(RUNTIME_KINDS)}")
    ref = job["spec"].get("runtimeRef") or {}
    want = (ref.get("kind") or trainjob.RUNTIME_KIND, ref.get("name"))
    have = (runtime["kind"], runtime["metadata"]["name"])
    if want != have:
        raise ValueError(f"TrainJob {job['metadata']['name']} references {want[0]}/{want[1]}, "
                         f"the runtime given is {have[0]}/{have[1]}")
    mpi = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("mpi")
    if mpi is None:
        raise ValueError(f"runtime {have[1]}: no mlPolicy.mpi; the local runner runs MPI "
                         "runtimes only")
    mpi = {"numProcPerNode": 1, "mpiImplementation": "OpenMPI",
           "sshAuthMountPath": DEFAULT_SSH_AUTH_MOUNT_PATH, "runLauncherAsNode": False, **mpi}
    if mpi["mpiImplementation"] != "OpenMPI":
        raise ValueError(f"mpiImplementation {mpi['mpiImplementation']!r} is not supported by "
                         "Trainer v2.3.0's MPI plugin; accepted: 'OpenMPI'")
    return mpi


def jobset_spec(job: Mapping, runtime: Mapping) -> dict:
    """The runtime's ``template.spec`` (a JobSet spec) with the TrainJob's
    ``runtimePatches`` merged, replicated jobs in the runtime's order."""
    spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
    order = [r["name"] for r in spec.get("replicatedJobs") or []]
    for patch in job["spec"].get("runtimePatches") or []:
        part = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if part:
            spec = strategic_merge.merge(spec, part)
    known = {n: i for i, n in enumerate(order)}
    spec["replicatedJobs"] = sorted(spec.get("replicatedJobs") or [],
                                    key=lambda r: known.get(r["name"], len(known)))
    return spec


def _is_trainer(rjob: Mapping) -> bool:
    labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ANCESTOR_LABEL) == ANCESTOR_TRAINER


def _gpus(resources: Mapping | None) -> int:
    """runtime.GetNumGPUPerNode (pkg/runtime/runtime.go l. 280-298): the first resource whose
    name contains "gpu", requests before limits; 0 if none."""
    for part in ("requests", "limits"):
        for res, q in ((resources or {}).get(part) or {}).items():
            if "gpu" in res.lower():
                text = str(q)
                n = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
                if math.ceil(n):
                    return math.ceil(n)
    return 0


def slots(job: Mapping, mpi: Mapping, spec: Mapping) -> int:
    """Slots per host (EnforceMLPolicy l. 128-139)."""
    trainer = job["spec"].get("trainer") or {}
    if trainer.get("numProcPerNode") is not None:
        return int(trainer["numProcPerNode"])
    if int(mpi["numProcPerNode"]) != 1:
        return int(mpi["numProcPerNode"])
    res = trainer.get("resourcesPerNode")
    if res is None:  # ExtractResourcePerNodeFromRuntime (runtime.go l. 254-277)
        for rjob in spec["replicatedJobs"]:
            if rjob["name"] == NODE or _is_trainer(rjob):
                c = _node_container(rjob, rjob["name"], required=False)
                if c is not None and c.get("resources"):
                    res = c["resources"]
                    break
    return max(_gpus(res), 1)


def pod_counts(job: Mapping, runtime: Mapping, spec: Mapping, as_node: bool,
               ) -> dict[str, tuple[int, int]]:
    """Replicated job name -> (child Jobs, pods per Job) (newRuntimeInfo, EnforceMLPolicy,
    builder.go Trainer: the trainer-ancestor job has 1 replica).

    Raises:
        ValueError: ``numNodes`` below 1.
    """
    num_nodes = (job["spec"].get("trainer") or {}).get("numNodes")
    if num_nodes is not None and int(num_nodes) < 1:
        raise ValueError(f"trainer.numNodes must be >= 1, got {num_nodes!r}")
    out = {}
    for rjob in spec["replicatedJobs"]:
        count = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism", 1))
        replicas = int(rjob.get("replicas", 1))
        if _is_trainer(rjob):
            count = int(runtime["spec"]["mlPolicy"].get("numNodes") or 1)
            replicas = 1
        if rjob["name"] == NODE and num_nodes is not None:
            count = max(int(num_nodes) - 1, 1) if as_node else int(num_nodes)
        out[rjob["name"]] = (replicas, count)
    return out


def pod_names(name: str, rjob: str, replicas: int, count: int) -> list[str]:
    """Pod hostnames of a replicated job: ``<J>-<rjob>-<jobIndex>-<podIndex>``."""
    return [f"{name}-{rjob}-{r}-{p}" for r in range(replicas) for p in range(count)]


def hostfile(name: str, subdomain: str, counts: Mapping[str, tuple[int, int]], slots_: int,
             as_node: bool) -> str:
    """The ``hostfile`` of ``<J>-mpi-hostfile`` (buildHostFileConfigMap): one
    ``<pod>.<subdomain> slots=<S>`` line per pod of the ``node`` job and, with
    ``runLauncherAsNode``, of the ``launcher`` job, in ``counts`` (runtime) order."""
    lines = []
    for rjob, (replicas, count) in counts.items():
        if rjob == NODE or (as_node and rjob == LAUNCHER):
            lines += [f"{h}.{subdomain} slots={slots_}\n"
                      for h in pod_names(name, rjob, replicas, count)]
    return "".join(lines)


def _node_container(rjob: Mapping, pod: str, required: bool = True) -> dict | None:
    pod_spec = rjob["template"]["spec"]["template"].get("spec") or {}
    c = next((c for c in pod_spec.get("containers") or [] if c.get("name") == NODE), None)
    if c is None and required:
        raise ValueError(f"{pod}: replicated job {rjob['name']!r} has no container named "
                         "'node' (the MPI plugin mounts the ssh Secret only there)")
    return c


def _merged_container(rjob: Mapping, pod: str, ctx: _Ctx, notes: list[str]) -> dict:
    """The ``node`` container after builder.go Trainer() and the MPI plugin's env."""
    c = dict(_node_container(rjob, pod))
    trainer, is_trainer = ctx.trainer, _is_trainer(rjob)
    if is_trainer:
        c.update({k: trainer[k] for k in ("image", "command", "args")
                  if trainer.get(k) is not None})
    env = list(c.get("env") or [])
    if rjob["name"] == LAUNCHER:
        env += [{"name": k, "value": v} for k, v in trainjob.launcher_env(ctx.slots).items()]
    if is_trainer or (ctx.as_node and rjob["name"] == NODE):
        env += list(trainer.get("env") or [])
        if trainer.get("resourcesPerNode"):
            notes.append(f"{pod}: trainer.resourcesPerNode dropped (no GPUs, RDMA, scheduler "
                         "or limits locally)")
    c["env"] = env
    return c


def pod_container(rjob: Mapping, pod: str, ctx: _Ctx, notes: list[str]) -> ContainerSpec:
    """One pod of replicated job ``rjob`` as a :class:`ContainerSpec` (role ``launcher`` or
    ``worker`` for the ``node`` job's pods).

    Raises:
        ValueError: no ``node`` container, an unsupported volume kind.
    """
    pod_spec = rjob["template"]["spec"]["template"].get("spec") or {}
    c = _merged_container(rjob, pod, ctx, notes)
    if len(pod_spec.get("containers") or []) > 1 or pod_spec.get("initContainers"):
        notes.append(f"{pod}: only the 'node' container runs locally")
    lp.drop_resources(c, pod, notes)
    vols = {v["name"]: v for v in pod_spec.get("volumes") or []}
    mounts, shm = [], None
    for vm in c.get("volumeMounts") or []:
        if vm["name"] not in vols:
            raise ValueError(f"{pod}: volumeMount {vm['name']!r} names no pod volume")
        mount, size = lp.volume_mount(vols[vm["name"]], vm, pod)
        shm = size if size is not None else shm
        mounts += [mount] if mount else []
    mounts.append(Mount("ssh", "ssh", ctx.ssh_path, True))
    role = "launcher" if rjob["name"] == LAUNCHER else "worker"
    if role == "launcher":
        mounts.append(Mount("config", "config", trainjob.HOSTFILE_DIR, True))
    cmd, args = c.get("command"), c.get("args")
    return ContainerSpec(
        name=pod, role=role, image=c["image"], entrypoint=tuple(cmd) if cmd else None,
        command=tuple(args) if args else None,
        environment=lp.container_env(c, pod, ctx.namespace, notes),
        working_dir=c.get("workingDir"), security=lp.security(pod_spec, c),
        resources=Resources(shm_size=shm, cpu_shares=lp.cpu_shares(c)),
        mounts=tuple(mounts), aliases=lp.aliases(pod, ctx.subdomain, ctx.namespace),
        # no subdomain search entry: only mpi-operator appends one (local_plan.dns_search)
        dns_search=lp.dns_search(ctx.subdomain, ctx.namespace, "launcher"))


def run_policy(job: Mapping, launcher: Mapping) -> RunPolicy:
    """The launcher job's ``backoffLimit`` and restart policy, ``dependsOn`` node Ready ->
    ``WaitForWorkersReady`` (none -> ``AtStartup``), the TrainJob's
    ``activeDeadlineSeconds``, cleanPodPolicy ``Running`` (see the module docstring).

    Raises:
        ValueError: a ``dependsOn`` other than ``node`` Ready.
    """
    depends = launcher.get("dependsOn") or []
    if depends and [(d.get("name"), d.get("status")) for d in depends] != [(NODE, "Ready")]:
        raise ValueError(f"launcher dependsOn {depends!r} is not supported locally; accepted: "
                         "none, or [{name: node, status: Ready}]")
    job_spec = launcher["template"].get("spec") or {}
    backoff = job_spec.get("backoffLimit")
    return RunPolicy(
        clean_pod_policy="Running",
        backoff_limit=DEFAULT_BACKOFF_LIMIT if backoff is None else int(backoff),
        active_deadline_seconds=job["spec"].get("activeDeadlineSeconds") or None,
        launcher_creation_policy="WaitForWorkersReady" if depends else "AtStartup",
        launcher_restart_policy=(job_spec["template"].get("spec") or {}).get(
            "restartPolicy") or "Never",
        # the TrainJob's own deadline, from its creation (kubeflow/trainer v2.3.0
        # pkg/controller/trainjob_controller.go reconcileDeadline l. 155-167)
        deadline_from="job")


def _jobset_notes(spec: Mapping, job: Mapping) -> list[str]:
    notes = []
    restarts = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
    if restarts:
        notes.append(f"JobSet failurePolicy.maxRestarts {restarts} not reproduced: the first "
                     "failed Job fails the TrainJob")
    success = spec.get("successPolicy") or {}
    if (success.get("operator", "All"), success.get("targetReplicatedJobs")) != (
            "All", [LAUNCHER]):
        notes.append("JobSet successPolicy: the TrainJob completes when the launcher does")
    if job["spec"].get("suspend"):
        notes.append("spec.suspend ignored: the job runs at once")
    return notes


def plan(job: Mapping, runtime: Mapping) -> LocalPlan:
    """What Trainer v2.3.0 + JobSet v0.12.0 would run for ``job`` on ``runtime``, as
    containers.

    Args:
        job: a ``trainer.kubeflow.org/v1alpha1`` TrainJob (``dict``).
        runtime: the ClusterTrainingRuntime / TrainingRuntime its ``runtimeRef`` names.

    Returns:
        :class:`LocalPlan` (``kind`` TrainJob): ``workers`` = the ``node`` job's pods
        ``<J>-node-0-<i>``, ``launcher`` = ``<J>-launcher-0-0``, the hostfile, network
        ``kfp-gpu-<NS>-<J>``, ssh files ``id_rsa`` 0640 and ``id_rsa.pub``/``authorized_keys``
        0644 in group ``fsGroup``, ``notes`` on what is not reproduced.

    Raises:
        ValueError: see :func:`check_objects`, :func:`pod_counts`, :func:`run_policy`; no
            ``launcher`` replicated job, or one with more than one pod.
    """
    mpi = check_objects(job, runtime)
    name = job["metadata"]["name"]
    ns = job["metadata"].get("namespace") or "default"
    spec = jobset_spec(job, runtime)
    rjobs = {r["name"]: r for r in spec["replicatedJobs"]}
    if LAUNCHER not in rjobs:
        raise ValueError(f"runtime {runtime['metadata']['name']}: no 'launcher' replicated job")
    as_node = bool(mpi["runLauncherAsNode"])
    counts = pod_counts(job, runtime, spec, as_node)
    if counts[LAUNCHER] != (1, 1):
        raise ValueError(f"the launcher job would have {counts[LAUNCHER][1]} pods "
                         "(mlPolicy.numNodes); the local runner runs one launcher")
    ctx = _Ctx(name, ns, (spec.get("network") or {}).get("subdomain") or name,
               slots(job, mpi, spec), mpi["sshAuthMountPath"], as_node,
               job["spec"].get("trainer") or {})
    notes = _jobset_notes(spec, job)
    workers = tuple(pod_container(rjobs[NODE], pod, ctx, notes)
                    for pod in pod_names(name, NODE, *counts.get(NODE, (0, 0))))
    launcher = pod_container(rjobs[LAUNCHER], f"{name}-launcher-0-0", ctx, notes)
    fs_group = ((rjobs[LAUNCHER]["template"]["spec"]["template"].get("spec") or {})
                .get("securityContext") or {}).get("fsGroup")
    return LocalPlan(
        name=name, namespace=ns, network=f"kfp-gpu-{ns}-{name}",
        hostfile=hostfile(name, ctx.subdomain, counts, ctx.slots, as_node),
        workers=workers, launcher=launcher, policy=run_policy(job, rjobs[LAUNCHER]),
        ssh=SshSecret(ctx.ssh_path,
                      modes=tuple((path, mode) for _, path, mode in trainjob.SSH_SECRET_ITEMS),
                      gid=None if fs_group is None else int(fs_group)),
        launcher_as_worker=as_node, notes=tuple(dict.fromkeys(notes)),
        controller=Controller(trainjob.KIND, discover_hosts=False, failure_reason=(
            "ReachedMaxRestarts" if "failurePolicy" in spec else "FailedJobs")))
