"""kfp.local's DockerRunner for `kfp-gpu run PIPELINE --local --runner docker`.

Every task runs in the image its spec names: the default
:class:`kfp_gpu.release.images.ImageSet` the components are decorated with, which is how the
locally built images are tagged (``make images-local``); no environment variable moves it.
Facts it works around (kfp 2.17,
kfp/local/config.py DockerRunner and kfp/local/docker_task_handler.py):
- DockerRunner passes docker-SDK ``containers.run`` kwargs through except image, command
  and volumes, so the data folder is bound with ``mounts`` (read-only, same path inside).
- The images run as uid 1000: the local pipeline root must be writable by it.
- Its task handler reports a container removed before the wait returned as SUCCESS:
  :func:`missing_outputs` checks that the artifacts exist instead of trusting it.
"""

from __future__ import annotations

import os
from pathlib import Path

IMAGE_USER = "1000"
#: Label on every task container of a run (value: the run id), so an interrupt can find
#: and remove them (DockerRunner passes ``labels`` to docker-SDK ``containers.run``:
#: kfp 2.17 kfp/local/config.py ``DockerRunner.DOCKER_CONTAINER_RUN_ARGS``).
RUN_LABEL = "kfp-gpu.local-run"


class EngineUnreachable(RuntimeError):
    """No Docker engine answers at ``$DOCKER_HOST`` (or the default socket)."""


def check_engine() -> None:
    """Ping the Docker engine before a run starts.

    Raises:
        EngineUnreachable: one line naming ``$DOCKER_HOST`` and what to do.
        RuntimeError: the ``docker`` SDK is not installed.
    """
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("--runner docker needs the docker SDK: pip install docker==7.1.0") from e
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env()
        try:
            client.ping()
        finally:
            client.close()
    except docker.errors.DockerException as e:
        raise EngineUnreachable(f"no Docker engine answers at {host} (DOCKER_HOST); start "
                                "one or set DOCKER_HOST, or use --runner subprocess") from e


def remove_containers(run_id: str) -> list[str]:
    """Remove (force: SIGKILL first) every container labelled ``RUN_LABEL=run_id``;
    returns their names. Used after SIGINT/SIGTERM."""
    import docker

    client = docker.from_env()
    try:
        names = []
        for c in client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"}):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:  # auto_remove got there first
                pass
            names.append(c.name)
        return names
    finally:
        client.close()


def runner(data_dir: str | None, run_id: str = ""):
    """A ``kfp.local.DockerRunner`` running as uid 1000 with ``data_dir`` bound read-only,
    its containers labelled ``RUN_LABEL=run_id``.

    Raises:
        RuntimeError: the ``docker`` SDK is not installed.
    """
    try:
        from docker.types import Mount
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("--runner docker needs the docker SDK: pip install docker==7.1.0") from e
    from kfp import local

    mounts = []
    if data_dir:
        path = str(Path(data_dir).expanduser().resolve())
        mounts.append(Mount(target=path, source=path, type="bind", read_only=True))
    return local.DockerRunner(user=IMAGE_USER, mounts=mounts, labels={RUN_LABEL: run_id})


def prepare_root(root: str) -> None:
    """Create the pipeline root and make it writable by the images' uid 1000 (mode 0o1777)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o1777)


#: Artifact types whose content is their metadata: KFP writes no file for them
#: (kfp/dsl/types/artifact_types.py ``Metrics``, ``ClassificationMetrics``,
#: ``SlicedClassificationMetrics`` log into ``metadata``).
METADATA_ONLY = ("system.Metrics", "system.ClassificationMetrics",
                 "system.SlicedClassificationMetrics")


def missing_outputs(outputs: dict) -> list[str]:
    """Names of artifact outputs (``{"uri": ..., "type": schema title}`` summaries) whose
    file/folder is absent; metadata-only types (:data:`METADATA_ONLY`) need none."""
    return [k for k, v in outputs.items()
            if isinstance(v, dict) and "uri" in v and v.get("type") not in METADATA_ONLY
            and not Path(v["uri"]).exists()]
