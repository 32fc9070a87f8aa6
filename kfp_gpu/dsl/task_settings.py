"""Compile-time settings of every pipeline task: credentials, volumes, CPU and memory.

What ``kfp-gpu compile`` options put on the tasks of the compiled pipelines (the checked-in
YAML is the build with none of them, :data:`DEFAULT`):

==========================================  ============================================
``--secret-env SECRET``                      the AWS keys of a Kubernetes Secret as env
                                             vars (:data:`AWS_REQUIRED` required,
                                             :data:`AWS_OPTIONAL` where the Secret has
                                             them): ``s3://`` on MinIO/SeaweedFS/AWS
``--secret-env SECRET:KEY=ENV[,KEY=ENV]``    the named keys of a Secret as env vars
``--pvc CLAIM:/mount/path``                  a PersistentVolumeClaim mounted on every task
``--secret-volume SECRET:/dir[:KEY]``        a Secret's files under ``/dir``; with KEY,
                                             ``GOOGLE_APPLICATION_CREDENTIALS=/dir/KEY``
                                             (a GCP service-account key for ``gs://``)
``--resources TASK=cpu:Q,memory:Q``          CPU/memory of one task (by display name)
==========================================  ============================================

Each is applied with kfp-kubernetes 2.17's own functions (``kfp/kubernetes/secret.py``
``use_secret_as_env`` / ``use_secret_as_volume``, ``kfp/kubernetes/volume.py``
``mount_pvc``) and the task's own setters (``kfp/dsl/pipeline_task.py``
``set_cpu_request`` ...), by :func:`apply` on each task in the pipelines' ``build()``.
With ``task_config_passthroughs`` (train_resnet_horovod) the KFP 2.17 driver hands the
Secret env and the volumes to the component (``backend/src/v2/driver/k8s.go``
``extendPodSpecPatch``), which passes them on to its MPIJob/TrainJob pods.

Resource keys of ``--resources``: ``cpu`` and ``memory`` set the request and the limit;
``cpu-request``, ``cpu-limit``, ``memory-request``, ``memory-limit`` one of them. Keys
not given keep the task's default (the pipeline entry's ``task_resources``; a request
above its limit is refused, as the API server would). Quantities: KFP's forms
(``pipeline_task.py`` ``_validate_cpu_request_limit``: ``2``, ``0.5``, ``500m``; ``_validate_memory_request_
limit``: ``6G``, ``512Mi``, ``8Gi``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kfp_gpu.dsl import k8s_rules

#: Keys ``--secret-env SECRET`` reads as env vars of the same names, required (the pod
#: does not start without them: Kubernetes ``secretKeyRef``).
AWS_REQUIRED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
#: Keys it reads when the Secret has them (``optional: true``): the endpoint of
#: MinIO/SeaweedFS, the region, a session token (kfp_gpu.inputs.storage's module docstring).
AWS_OPTIONAL = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION",
                "AWS_SESSION_TOKEN")
#: google-auth's variable for a service-account key file (``google/auth/_default.py``
#: ``_get_explicit_environ_credentials``; google-cloud-storage's client reads it).
GOOGLE_CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # Kubernetes IsConfigMapKey
_CPU = re.compile(r"([0-9]*[.])?[0-9]+m?")  # kfp/dsl/pipeline_task.py (cpu)
_MEMORY = re.compile(r"[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?")  # (memory)
#: ``--resources`` keys -> the Resources fields they set.
RESOURCE_KEYS = {"cpu": ("cpu_request", "cpu_limit"), "memory": ("memory_request", "memory_limit"),
                 "cpu-request": ("cpu_request",), "cpu-limit": ("cpu_limit",),
                 "memory-request": ("memory_request",), "memory-limit": ("memory_limit",)}
RESOURCE_FORM = ("TASK=KEY:QUANTITY[,KEY:QUANTITY], KEY one of " + ", ".join(RESOURCE_KEYS)
                 + ", e.g. train-lstm=cpu:2,memory:6G")


@dataclass(frozen=True)
class SecretEnv:
    """Keys of the Secret ``secret`` as env vars (``key_to_env``: (key, env) pairs);
    ``optional``: a missing Secret or key leaves the variable unset."""

    secret: str
    key_to_env: tuple[tuple[str, str], ...]
    optional: bool = False


@dataclass(frozen=True)
class PvcMount:
    """The PersistentVolumeClaim ``claim`` mounted at ``path`` on every task."""

    claim: str
    path: str


@dataclass(frozen=True)
class SecretVolume:
    """The Secret ``secret``'s keys as files under ``path``; ``key_file``: the key holding
    a GCP service-account JSON (sets :data:`GOOGLE_CREDENTIALS_ENV` to ``path/key_file``)."""

    secret: str
    path: str
    key_file: str = ""


@dataclass(frozen=True)
class Resources:
    """CPU/memory of one task: Kubernetes quantities, ``""`` = not set."""

    cpu_request: str = ""
    cpu_limit: str = ""
    memory_request: str = ""
    memory_limit: str = ""

    def merged(self, override: Resources) -> Resources:
        """``self`` with the fields ``override`` sets replaced."""
        return dataclasses.replace(self, **{k: v for k, v in dataclasses.asdict(override).items()
                                            if v})

    def text(self) -> str:
        """The ``--resources`` form of the fields set, e.g. ``cpu-limit:2,memory-limit:4G``."""
        return ",".join(f"{f.name.replace('_', '-')}:{getattr(self, f.name)}"
                        for f in dataclasses.fields(self) if getattr(self, f.name))

    def check(self, where: str = "") -> Resources:
        """``self`` if every request is at most its limit; else ValueError naming both."""
        from kubernetes.utils import parse_quantity

        for what in ("cpu", "memory"):
            req, lim = getattr(self, f"{what}_request"), getattr(self, f"{what}_limit")
            if req and lim and parse_quantity(req) > parse_quantity(lim):
                raise ValueError(f"{where}{what} request {req} is above its limit {lim} (the API "
                                 f"server refuses such a pod); give {what}:Q for both, or a "
                                 f"{what}-limit too")
        return self


@dataclass(frozen=True)
class TaskSettings:
    """Everything :func:`apply` puts on a task; the default (:data:`DEFAULT`) puts nothing
    but the pipeline's own resources."""

    secret_env: tuple[SecretEnv, ...] = ()
    pvcs: tuple[PvcMount, ...] = ()
    secret_volumes: tuple[SecretVolume, ...] = ()
    #: (task display name, override) pairs.
    resources: tuple[tuple[str, Resources], ...] = ()

    def is_default(self) -> bool:
        """True when nothing is set (the checked-in build)."""
        return self == DEFAULT

    def resources_for(self, name: str, default: Resources) -> Resources:
        """Task ``name``'s resources: ``default`` with the overrides for ``name`` applied.

        Raises:
            ValueError: a request above its limit after the merge.
        """
        out = default
        for task, override in self.resources:
            if task == name:
                out = out.merged(override)
        return out.check(f"--resources {name}: ")

    def check_tasks(self, accepted: Iterable[str]) -> None:
        """Raise ValueError when ``--resources`` names a task not in ``accepted``."""
        names = sorted(set(accepted))
        for task, _ in self.resources:
            if task not in names:
                raise ValueError(f"--resources {task}=...: no task {task!r} in the compiled "
                                 f"pipelines; accepted task names: {', '.join(names) or 'none'}")


DEFAULT = TaskSettings()


def _secret_name(name: str, item: str) -> str:
    return k8s_rules.dns1123_subdomain(name, f"secret of {item!r}")


def _abs_path(path: str, item: str, form: str) -> str:
    if not path.startswith("/") or ":" in path or ".." in path.split("/"):
        raise ValueError(f"{item!r}: mount path {path!r} must be an absolute path without "
                         f"':' or '..'; accepted: {form}")
    return path.rstrip("/") or "/"


def parse_secret_env(item: str) -> tuple[SecretEnv, ...]:
    """``SECRET`` (the AWS preset: :data:`AWS_REQUIRED` + optional :data:`AWS_OPTIONAL`)
    or ``SECRET:KEY=ENV[,KEY=ENV]``.

    Raises:
        ValueError: one line naming the accepted forms.
    """
    form = "SECRET (its AWS_* keys) or SECRET:KEY=ENV[,KEY=ENV], e.g. s3-creds or " \
           "mlpipeline-minio-artifact:accesskey=AWS_ACCESS_KEY_ID,secretkey=AWS_SECRET_ACCESS_KEY"
    name, sep, pairs = item.partition(":")
    if not name:
        raise ValueError(f"--secret-env {item!r}: no Secret name; accepted: {form}")
    _secret_name(name, item)
    if not sep:
        return (SecretEnv(name, tuple((k, k) for k in AWS_REQUIRED)),
                SecretEnv(name, tuple((k, k) for k in AWS_OPTIONAL), optional=True))
    out = []
    for pair in pairs.split(","):
        key, eq, env = pair.partition("=")
        if not eq or not _SECRET_KEY.fullmatch(key) or not _ENV_NAME.fullmatch(env):
            raise ValueError(f"--secret-env {item!r}: {pair!r} is not KEY=ENV (a Secret key "
                             f"of letters, digits, '-', '_', '.'; an env name like "
                             f"AWS_ACCESS_KEY_ID); accepted: {form}")
        out.append((key, env))
    return (SecretEnv(name, tuple(out)),)


def parse_pvc(item: str) -> PvcMount:
    """``CLAIM:/mount/path``. Raises ValueError naming the accepted form."""
    form = "CLAIM:/mount/path, e.g. imdb-data:/mnt/data"
    claim, sep, path = item.partition(":")
    if not sep or not claim or not path:
        raise ValueError(f"--pvc {item!r}: accepted: {form}")
    k8s_rules.dns1123_subdomain(claim, f"claim of --pvc {item!r}")
    return PvcMount(claim, _abs_path(path, item, form))


def parse_secret_volume(item: str) -> SecretVolume:
    """``SECRET:/dir`` or ``SECRET:/dir:KEY``. Raises ValueError naming the accepted form."""
    form = "SECRET:/dir[:KEY], e.g. gcp-sa:/var/secrets/google:key.json"
    secret, sep, rest = item.partition(":")
    path, _, key = rest.partition(":")
    if not sep or not secret or not path:
        raise ValueError(f"--secret-volume {item!r}: accepted: {form}")
    _secret_name(secret, item)
    if key and not _SECRET_KEY.fullmatch(key):
        raise ValueError(f"--secret-volume {item!r}: {key!r} is not a Secret key; accepted: "
                         f"{form}")
    return SecretVolume(secret, _abs_path(path, item, form), key)


def parse_resources(item: str) -> tuple[str, Resources]:
    """``TASK=KEY:Q[,KEY:Q]`` -> (task, override). Raises ValueError naming the forms."""
    task, eq, spec = item.partition("=")
    if not eq or not task or not spec:
        raise ValueError(f"--resources {item!r}: accepted: {RESOURCE_FORM}")
    fields: dict[str, str] = {}
    for part in spec.split(","):
        key, colon, qty = part.partition(":")
        if not colon or key not in RESOURCE_KEYS:
            raise ValueError(f"--resources {item!r}: {part!r}: accepted: {RESOURCE_FORM}")
        rule, words = ((_CPU, "a CPU quantity such as 2, 0.5 or 500m") if key.startswith("cpu")
                       else (_MEMORY, "a memory quantity such as 6G, 512Mi or 8Gi"))
        if not rule.fullmatch(qty) or not re.search(r"[1-9]", qty):
            raise ValueError(f"--resources {item!r}: {key} {qty!r} is not {words} (> 0)")
        for name in RESOURCE_KEYS[key]:
            fields[name] = qty
    return task, Resources(**fields).check(f"--resources {item!r}: ")


def from_parsed(secret_env: Iterable[tuple[SecretEnv, ...]] = (),
                pvcs: Iterable[PvcMount] = (), secret_volumes: Iterable[SecretVolume] = (),
                resources: Iterable[tuple[str, Resources]] = ()) -> TaskSettings:
    """The settings of parsed ``compile`` options, each entry as its parser returns it
    (:func:`parse_secret_env`, :func:`parse_pvc`, :func:`parse_secret_volume`,
    :func:`parse_resources`; the CLI's option callbacks call them, once per value); no
    text is parsed here.

    Raises:
        ValueError: a mount path given twice (``--pvc``/``--secret-volume``).
    """
    mounts, volumes = tuple(pvcs), tuple(secret_volumes)
    paths = [m.path for m in mounts] + [v.path for v in volumes]
    for p in paths:
        if paths.count(p) > 1:
            raise ValueError(f"mount path {p} given twice (--pvc/--secret-volume): each "
                             "mount needs its own path")
    return TaskSettings(secret_env=tuple(s for item in secret_env for s in item),
                        pvcs=mounts, secret_volumes=volumes, resources=tuple(resources))


def from_options(secret_env: Iterable[str] = (), pvc: Iterable[str] = (),
                 secret_volume: Iterable[str] = (), resources: Iterable[str] = ()
                 ) -> TaskSettings:
    """The settings of the ``compile`` options' texts, each parsed once as above
    (:func:`from_parsed`); for callers that hold the texts, e.g. tests.

    Raises:
        ValueError: the first malformed item (one line naming the accepted form), a mount
            path given twice.
    """
    return from_parsed(secret_env=[parse_secret_env(item) for item in secret_env],
                       pvcs=[parse_pvc(p) for p in pvc],
                       secret_volumes=[parse_secret_volume(v) for v in secret_volume],
                       resources=[parse_resources(r) for r in resources])


def apply(task, name: str, settings: TaskSettings | None = None,
          default: Resources | None = None):
    """Name ``task`` ``name`` and put ``settings`` on it: its resources (``default``
    merged with the ``--resources`` override for ``name``), the Secret env vars, the PVC
    and Secret volume mounts; returns ``task``.

    Raises:
        ValueError: a request above its limit after the merge.
    """
    settings = settings or DEFAULT
    task.set_display_name(name)
    res = settings.resources_for(name, default or Resources())
    for setter, value in ((task.set_cpu_request, res.cpu_request),
                          (task.set_cpu_limit, res.cpu_limit),
                          (task.set_memory_request, res.memory_request),
                          (task.set_memory_limit, res.memory_limit)):
        if value:
            setter(value)
    if settings.is_default():
        return task
    from kfp import kubernetes

    for s in settings.secret_env:
        kubernetes.use_secret_as_env(task, s.secret, dict(s.key_to_env), optional=s.optional)
    for m in settings.pvcs:
        kubernetes.mount_pvc(task, pvc_name=m.claim, mount_path=m.path)
    for v in settings.secret_volumes:
        kubernetes.use_secret_as_volume(task, v.secret, mount_path=v.path)
        if v.key_file:
            task.set_env_variable(GOOGLE_CREDENTIALS_ENV, f"{v.path.rstrip('/')}/{v.key_file}")
    return task
