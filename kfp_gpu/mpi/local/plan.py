"""Pure planning for the local MPIJob runner: an MPIJob ``dict`` -> container specs.

No I/O. :func:`plan` reads the exact ``kubeflow.org/v2beta1`` MPIJob object that
:func:`kfp_gpu.mpi.spec.mpijob.build` emits (or any MPIJob of that API) and returns what the MPI
Operator's controller would make of it, as containers instead of pods. The Docker side
(:mod:`kfp_gpu.mpi.local.runner`) only executes the plan.

Upstream source followed (kubeflow/mpi-operator v0.8.2, commit caa3c47,
``pkg/controller/mpi_job_controller.go`` unless named otherwise):

- ``newWorker``: pod ``hostname`` ``<J>-worker-<i>`` and ``subdomain`` ``<J>`` (the
  headless Service); the DNS search path ``<J>.<NS>.svc.cluster.local`` is appended; a
  Worker container with neither command nor args gets ``/usr/sbin/sshd -De``; env
  ``K_MPI_JOB_ROLE=worker``; the ssh Secret volume (``setupSSHOnPod``).
- ``newLauncherPodTemplate``: hostname ``<J>-launcher``; env ``K_MPI_JOB_ROLE=launcher``,
  for OpenMPI ``ompiEnvVars`` (``OMPI_MCA_orte_keep_fqdn_hostnames=true``,
  ``OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile``,
  ``OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10``) and
  ``OMPI_MCA_orte_set_default_slots=<slotsPerWorker>`` (Intel / MPICH: their own
  variables); ``NVIDIA_VISIBLE_DEVICES`` and ``NVIDIA_DRIVER_CAPABILITIES`` emptied unless
  ``runLauncherAsWorker``; the ConfigMap ``<J>-config`` at ``/etc/mpi`` (``hostfile`` mode
  0444, ``discover_hosts.sh`` mode 0555; Launcher only); the ssh Secret.
- ``newConfigMap``: hostfile lines ``<J>-worker-<i>.<J>.<NS>.svc slots=<S>`` (OpenMPI) or
  ``...:<S>`` (Intel, MPICH), the Launcher first when ``runLauncherAsWorker``;
  ``updateDiscoverHostsInConfigMap``: ``#!/bin/sh`` + ``echo <host>`` per running Worker.
- ``setupSSHOnPod`` (l. 1793-1816) and ``sshVolumeItems`` (l. 142-155): Secret ``<J>-ssh``
  items ``id_rsa``, ``id_rsa.pub``, ``authorized_keys`` (no per-item mode) at
  ``spec.sshAuthMountPath``, ``defaultMode`` 0600 only for ``/root/.ssh`` (else unset: the
  Secret volume default, 0644); kubelet adds the pod's ``fsGroup`` as the files' group and
  group read (:func:`ssh_secret`, :mod:`kfp_gpu.mpi.local.workspace`).
- ``pkg/apis/kubeflow/v2beta1/default.go``: ``slotsPerWorker`` 1, ``sshAuthMountPath``
  ``/root/.ssh``, ``mpiImplementation`` OpenMPI, ``launcherCreationPolicy`` AtStartup,
  ``cleanPodPolicy`` None, Launcher restartPolicy OnFailure, Worker Never.

Not reproduced (see docs/local-mpijob.md): GPUs and other extended resources (dropped with a
note), cpu/memory requests and limits, schedulers, gang scheduling, RDMA, a headless
Service (Docker network aliases stand in for its DNS names), probes, ``$(VAR)`` expansion.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kfp_gpu.mpi.local.model import (  # the plan's types, also reached as local_plan.X
    ContainerSpec,
    LocalPlan,
    Mount,
    Resources,
    RunPolicy,
    Security,
    SshSecret,
)

CONFIG_MOUNT_PATH = "/etc/mpi"  # configMountPath
HOSTFILE = "hostfile"  # hostfileName
DISCOVER_HOSTS = "discover_hosts.sh"  # discoverHostsScriptName
ROOT_SSH_PATH = "/root/.ssh"  # rootSSHPath
DEFAULT_WORKER_COMMAND = ("/usr/sbin/sshd", "-De")  # newWorker
CLUSTER_DOMAIN = "cluster.local"
#: ``/dev/shm`` size for a Memory emptyDir without ``sizeLimit`` (a pod's would be bounded
#: only by node memory; Docker's own default is 64 MiB, too small for NCCL/Horovod).
DEFAULT_SHM_BYTES = 1 << 30
#: Volume kinds the runner maps to local storage (docs/local-mpijob.md, "Volumes").
VOLUME_KINDS = ("emptyDir", "hostPath", "persistentVolumeClaim")
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity (``"1Gi"``, ``"512M"``, ``"1073741824"``) in bytes.

    Raises:
        ValueError: for other text (accepted suffixes: k, M, G, T, Ki, Mi, Gi, Ti).
    """
    m = _QUANTITY.match(str(text).strip())
    if not m:
        raise ValueError(f"invalid memory quantity {text!r}: accepted are numbers with an "
                         "optional suffix k, M, G, T, Ki, Mi, Gi, Ti (e.g. '16Gi')")
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


def host_fqdn(host: str, job: str, namespace: str) -> str:
    """``<host>.<job>.<namespace>.svc``: the name newConfigMap writes (no cluster domain)."""
    return f"{host}.{job}.{namespace}.svc"


def aliases(host: str, job: str, namespace: str) -> tuple[str, ...]:
    """DNS names a pod with ``hostname`` ``host`` and ``subdomain`` ``job`` answers to
    through the headless Service: short name up to the full cluster-domain name."""
    fq = host_fqdn(host, job, namespace)
    return (host, f"{host}.{job}", f"{host}.{job}.{namespace}", fq, f"{fq}.{CLUSTER_DOMAIN}")


def dns_search(job: str, namespace: str, role: str) -> tuple[str, ...]:
    """A ClusterFirst pod's search path (``<ns>.svc.cluster.local svc.cluster.local
    cluster.local``); Workers get ``<job>.<ns>.svc.cluster.local`` appended (newWorker)."""
    base = (f"{namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN)
    return (*base, f"{job}.{namespace}.svc.{CLUSTER_DOMAIN}") if role == "worker" else base


def hostfile(job: str, namespace: str, workers: int, slots: int,
             implementation: str = "OpenMPI", launcher_as_worker: bool = False) -> str:
    """The ConfigMap's ``hostfile`` (newConfigMap): one line per Worker, in index order.

    Raises:
        ValueError: an implementation other than OpenMPI, Intel, MPICH.
    """
    if implementation not in ("OpenMPI", "Intel", "MPICH"):
        raise ValueError(f"invalid mpiImplementation {implementation!r}; accepted: "
                         "'OpenMPI', 'Intel', 'MPICH'")
    fmt = "{} slots={}\n" if implementation == "OpenMPI" else "{}:{}\n"
    hosts = [f"{job}-launcher"] if launcher_as_worker else []
    hosts += [f"{job}-worker-{i}" for i in range(workers)]
    return "".join(fmt.format(host_fqdn(h, job, namespace), slots) for h in hosts)


def discover_hosts(job: str, namespace: str, running: list[str],
                   launcher_as_worker: bool = False) -> str:
    """``discover_hosts.sh`` (updateDiscoverHostsInConfigMap): the running Worker pod
    names, sorted, as ``echo <fqdn>`` lines after ``#!/bin/sh``."""
    lines = ["#!/bin/sh"]
    if launcher_as_worker:
        lines.append(f"echo {host_fqdn(job + '-launcher', job, namespace)}")
    lines += [f"echo {host_fqdn(p, job, namespace)}" for p in sorted(running)]
    return "\n".join(lines) + "\n"


def role_env(role: str, slots: int, implementation: str, launcher_as_worker: bool,
             ) -> dict[str, str]:
    """Environment the controller appends to the main container (launcherEnvVars /
    workerEnvVars, ompiEnvVars / intelEnvVars / mpichEnvVars, nvidiaDisableEnvVars)."""
    env = {"K_MPI_JOB_ROLE": role}
    if role != "launcher":
        return env
    hostfile_path = f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"
    if implementation == "OpenMPI":
        env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                    "OMPI_MCA_orte_default_hostfile": hostfile_path,
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                    "OMPI_MCA_orte_set_default_slots": str(slots)})
    elif implementation == "Intel":
        env.update({"I_MPI_HYDRA_HOST_FILE": hostfile_path,
                    "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
                    "I_MPI_PERHOST": str(slots)})
    else:
        env.update({"HYDRA_HOST_FILE": hostfile_path,
                    "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10"})
    if not launcher_as_worker:
        env.update({"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""})
    return env


def container_env(container: Mapping, pod: str, namespace: str, notes: list[str],
                  ) -> dict[str, str]:
    """The container's ``env`` as name -> value (a later duplicate wins). ``valueFrom``
    fieldRefs ``metadata.name`` / ``metadata.namespace`` are resolved; any other
    ``valueFrom`` (secrets, status.podIP, ...) is dropped with a note."""
    out: dict[str, str] = {}
    for e in container.get("env") or []:
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if "valueFrom" not in e:
            out[e["name"]] = str(e.get("value", ""))
        elif ref in ("metadata.name", "metadata.namespace"):
            out[e["name"]] = pod if ref == "metadata.name" else namespace
        else:
            notes.append(f"{pod}: env {e['name']} (valueFrom) dropped: not resolvable locally")
    return out


def security(pod_spec: Mapping, container: Mapping) -> Security:
    """Docker user/groups/capabilities from pod and container ``securityContext``
    (the container's ``runAsUser``/``runAsGroup`` win, as in Kubernetes)."""
    pod_sc = pod_spec.get("securityContext") or {}
    c_sc = container.get("securityContext") or {}
    uid = c_sc.get("runAsUser", pod_sc.get("runAsUser"))
    gid = c_sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    user = None if uid is None else (f"{uid}:{gid}" if gid is not None else str(uid))
    groups = [str(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(str(pod_sc["fsGroup"]))
    caps = tuple((c_sc.get("capabilities") or {}).get("add") or ())
    return Security(user=user, group_add=tuple(dict.fromkeys(groups)), cap_add=caps)


def volume_mount(vol: Mapping, vm: Mapping, pod: str) -> tuple[Mount | None, int | None]:
    """A pod volume + its volumeMount -> (Mount, shm bytes for a Memory /dev/shm).

    Raises:
        ValueError: a volume kind outside :data:`VOLUME_KINDS`.
    """
    ro, sub, target = bool(vm.get("readOnly")), vm.get("subPath", ""), vm["mountPath"]
    if "emptyDir" in vol:
        ed = vol["emptyDir"] or {}
        if ed.get("medium") == "Memory":
            size = quantity_bytes(ed["sizeLimit"]) if ed.get("sizeLimit") else DEFAULT_SHM_BYTES
            if target == "/dev/shm":
                return None, size
            return Mount("tmpfs", str(size), target, ro), None
        return Mount("emptyDir", f"{pod}/{vol['name']}", target, ro, sub), None
    if "hostPath" in vol:
        return Mount("hostPath", vol["hostPath"]["path"], target, ro, sub), None
    if "persistentVolumeClaim" in vol:
        pvc = vol["persistentVolumeClaim"]
        return Mount("pvc", pvc["claimName"], target, ro or bool(pvc.get("readOnly")), sub), None
    kinds = sorted(k for k in vol if k != "name")
    raise ValueError(f"{pod}: volume {vol.get('name')!r} of kind {kinds} is not supported "
                     f"by the local runner; accepted: {', '.join(VOLUME_KINDS)}")


def cpu_shares(container: Mapping) -> int:
    """The container's ``cpu.shares`` as the kubelet sets it from its CPU request:
    kubernetes ``pkg/kubelet/cm/helpers_linux.go`` (read at 00ac878e) ``MilliCPUToShares``:
    1024 per CPU, at least ``MinShares`` 2, and 2 for no request (a request defaults to the
    limit when only a limit is given: ``pkg/apis/core/v1/defaults.go``). So a Worker without
    a CPU request gets the lowest weight, and the component's own container (Docker's
    1024) keeps its CPU when the job's ranks saturate a small machine, as it would on its
    own node in a cluster.

    Raises:
        ValueError: a CPU quantity that is not ``<number>`` or ``<number>m``.
    """
    res = container.get("resources") or {}
    text = str((res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")
               or "0")
    try:
        milli = float(text[:-1]) if text.endswith("m") else float(text) * 1000
    except ValueError:
        raise ValueError(f"invalid cpu quantity {text!r}; accepted e.g. 500m, 2, 0.5") from None
    return max(2, int(milli * 1024 // 1000)) if milli > 0 else 2


def drop_resources(container: Mapping, pod: str, notes: list[str]) -> None:
    """Append a note naming the container's resource requests/limits (not applied locally)."""
    res = container.get("resources") or {}
    names = sorted({k for part in ("limits", "requests") for k in (res.get(part) or {})})
    if names:
        notes.append(f"{pod}: resources {', '.join(names)} dropped (no GPUs, RDMA, scheduler "
                     "or limits locally; the CPU request sets cpu.shares)")


def pod_container(template: Mapping, pod: str, role: str, job: Mapping,
                  notes: list[str]) -> ContainerSpec:
    """One pod template (+ what the controller adds) -> :class:`ContainerSpec`.

    Raises:
        ValueError: a template without containers, or an unsupported volume.
    """
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    spec = template.get("spec") or {}
    if not spec.get("containers"):
        raise ValueError(f"{pod}: the pod template has no containers")
    c = spec["containers"][0]
    if len(spec["containers"]) > 1 or spec.get("initContainers"):
        notes.append(f"{pod}: only the first container runs locally")
    drop_resources(c, pod, notes)
    cmd, args = c.get("command"), c.get("args")
    if role == "worker" and not cmd and not args:
        cmd = list(DEFAULT_WORKER_COMMAND)
    s = job["spec"]
    slots = int(s.get("slotsPerWorker", 1))
    env = container_env(c, pod, ns, notes)
    env.update(role_env(role, slots, s.get("mpiImplementation", "OpenMPI"),
                        bool(s.get("runLauncherAsWorker"))))
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    mounts, shm = [], None
    for vm in c.get("volumeMounts") or []:
        if vm["name"] not in vols:
            raise ValueError(f"{pod}: volumeMount {vm['name']!r} names no pod volume")
        mount, size = volume_mount(vols[vm["name"]], vm, pod)
        shm = size if size is not None else shm
        mounts += [mount] if mount else []
    mounts.append(Mount("ssh", "ssh", s.get("sshAuthMountPath", ROOT_SSH_PATH), True))
    if role == "launcher":
        mounts.append(Mount("config", "config", CONFIG_MOUNT_PATH, True))
    return ContainerSpec(
        name=pod, role=role, image=c["image"], entrypoint=tuple(cmd) if cmd else None,
        command=tuple(args) if args else None, environment=env,
        working_dir=c.get("workingDir"), security=security(spec, c),
        resources=Resources(shm_size=shm, cpu_shares=cpu_shares(c)),
        mounts=tuple(mounts), aliases=aliases(pod, name, ns), dns_search=dns_search(name, ns, role))


def ssh_secret(spec: Mapping, notes: list[str]) -> SshSecret:
    """The ssh Secret volume as the pods see it: mount path, mode and group.

    ``defaultMode`` 0600 for ``/root/.ssh``, else unset, i.e. 0644 (mpi-operator v0.8.2
    ``setupSSHOnPod``; the Secret volume's API default ``SecretVolumeSourceDefaultMode``,
    k8s.io/api ``core/v1/types.go``). ``gid``: the pods' ``fsGroup``, which kubelet gives
    the files of every volume of the pod (kubernetes ``pkg/volume/volume_linux.go``
    SetVolumeOwnership; :mod:`kfp_gpu.mpi.local.workspace` applies it with the group-read
    bits). The runner mounts one ssh folder in every container: when Launcher and Workers
    name different ``fsGroup`` values the Workers' is used and a note says so.
    """
    mount_path = spec.get("sshAuthMountPath") or ROOT_SSH_PATH
    replicas = spec.get("mpiReplicaSpecs") or {}
    groups = {role: ((rs.get("template", {}).get("spec") or {}).get("securityContext")
                     or {}).get("fsGroup") for role, rs in replicas.items() if rs}
    gid = groups.get("Worker", groups.get("Launcher"))
    if "Worker" in groups and groups.get("Launcher") != groups["Worker"]:
        notes.append(f"ssh files: group {groups['Worker']} (the Workers' fsGroup) also in the "
                     f"Launcher, whose fsGroup is {groups.get('Launcher')}")
    return SshSecret(mount_path, 0o600 if mount_path == ROOT_SSH_PATH else 0o644,
                     gid=None if gid is None else int(gid))


def run_policy(spec: Mapping) -> RunPolicy:
    """:class:`RunPolicy` with upstream defaults (default.go; batch/v1 backoffLimit 6)."""
    rp = spec.get("runPolicy") or {}
    launcher = (spec.get("mpiReplicaSpecs") or {}).get("Launcher") or {}
    backoff = rp.get("backoffLimit")
    return RunPolicy(clean_pod_policy=rp.get("cleanPodPolicy") or "None",
                     backoff_limit=6 if backoff is None else int(backoff),
                     active_deadline_seconds=rp.get("activeDeadlineSeconds"),
                     launcher_creation_policy=spec.get("launcherCreationPolicy") or "AtStartup",
                     launcher_restart_policy=launcher.get("restartPolicy") or "OnFailure")


def plan(job: Mapping) -> LocalPlan:
    """What mpi-operator's controller would create for ``job``, as containers.

    Args:
        job: a ``kubeflow.org/v2beta1`` MPIJob object (``dict``), e.g. from
            :func:`kfp_gpu.mpi.spec.mpijob.build` or a YAML file.

    Returns:
        :class:`LocalPlan`: Worker containers ``<J>-worker-<i>``, the Launcher
        ``<J>-launcher``, the hostfile text, the network name ``kfp-gpu-<NS>-<J>``, and
        ``notes`` on what was dropped (GPU/RDMA/cpu/memory resources, valueFrom env).

    Raises:
        ValueError: not a v2beta1 MPIJob, no Launcher, an unsupported volume kind.
    """
    if job.get("apiVersion") != "kubeflow.org/v2beta1" or job.get("kind") != "MPIJob":
        raise ValueError(f"not a kubeflow.org/v2beta1 MPIJob: apiVersion "
                         f"{job.get('apiVersion')!r}, kind {job.get('kind')!r}")
    name = job["metadata"]["name"]
    ns = job["metadata"].get("namespace") or "default"
    job = {**job, "metadata": {**job["metadata"], "namespace": ns}}
    spec = job["spec"]
    replicas = spec.get("mpiReplicaSpecs") or {}
    if "Launcher" not in replicas:
        raise ValueError(f"MPIJob {name}: spec.mpiReplicaSpecs needs a Launcher")
    notes: list[str] = []
    worker_rs = replicas.get("Worker") or {}
    n = int(worker_rs.get("replicas", 0)) if worker_rs else 0
    workers = tuple(pod_container(worker_rs["template"], f"{name}-worker-{i}", "worker", job,
                                  notes) for i in range(n))
    launcher = pod_container(replicas["Launcher"]["template"], f"{name}-launcher", "launcher",
                             job, notes)
    impl = spec.get("mpiImplementation") or "OpenMPI"
    as_worker = bool(spec.get("runLauncherAsWorker"))
    return LocalPlan(
        name=name, namespace=ns, network=f"kfp-gpu-{ns}-{name}",
        hostfile=hostfile(name, ns, n, int(spec.get("slotsPerWorker", 1)), impl, as_worker),
        workers=workers, launcher=launcher, policy=run_policy(spec),
        ssh=ssh_secret(spec, notes),
        launcher_as_worker=as_worker, mpi_implementation=impl,
        notes=tuple(dict.fromkeys(notes)))
