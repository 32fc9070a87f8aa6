"""Small helpers over the docker SDK for the container tests (no pytest imports here).

docker SDK: https://docker-py.readthedocs.io (containers.run / wait / logs / remove).
"""

from __future__ import annotations

import dataclasses
import os
import secrets

LABEL = "kfp-gpu-test"
#: Six hex digits drawn once per test session: the jobs, containers and
#: networks the container tests create carry it in their names, so two sessions on one
#: engine never meet (container names are engine-wide: a second run of a job name would
#: find the first one's containers, or remove them).
SESSION = secrets.token_hex(3)
NAMES = ("trainer", "horovod", "launcher")


def unique(name: str) -> str:
    """``name`` with this session's token, e.g. ``lmpi-cli`` -> ``lmpi-cli-3fa9c1`` (a valid
    DNS-1123 label while ``name`` is one of at most 56 characters)."""
    return f"{name}-{SESSION}"


def image_ref(name: str) -> str:
    """The reference of runtime image ``name`` that the checked-in compiled YAML names (the
    default :class:`kfp_gpu.release.images.ImageSet`, the tag ``make images-local`` gives).

    Raises:
        ValueError: ``name`` is not trainer, horovod or launcher.
    """
    from kfp_gpu.release.images import ImageSet

    return ImageSet().image(name)


@dataclasses.dataclass(frozen=True)
class ContainerResult:
    """What a finished container left: exit code and its combined stdout+stderr (text)."""

    exit_code: int
    output: str

    def check(self) -> str:
        """The output; raises AssertionError with the output when the exit code is not 0."""
        assert self.exit_code == 0, f"exit code {self.exit_code}:\n{self.output}"
        return self.output


def run_container(client, ref: str, command: list[str], *, timeout_s: float = 300,
                  **kwargs) -> ContainerResult:
    """Run ``command`` in a new container of ``ref``, wait, collect output, remove it.

    ``kwargs`` go to ``client.containers.run`` (user, environment, mounts, network ...).
    The container carries the label ``kfp-gpu-test=<session>`` (``docker_client`` fixture)
    so that a container left by an interrupted test is removed at session end.

    Raises:
        requests.exceptions.ReadTimeout (from docker SDK): the container ran past
        ``timeout_s``; it is killed and removed first.
    """
    labels = dict(kwargs.pop("labels", {}) or {})
    labels[LABEL] = getattr(client, "kfp_gpu_session", "manual")
    container = client.containers.run(ref, command, detach=True, labels=labels, **kwargs)
    try:
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:
            container.kill()
            raise
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return ContainerResult(int(status["StatusCode"]), output)
    finally:
        container.remove(force=True)


def remove_labelled(client, labels: dict[str, str]) -> None:
    """Remove containers and networks carrying all of ``labels`` (best effort)."""
    selector = [f"{k}={v}" for k, v in labels.items()]
    for container in client.containers.list(all=True, filters={"label": selector}):
        container.remove(force=True)
    for network in client.networks.list(filters={"label": selector}):
        network.remove()


def module_path(module_file: str) -> str:
    """Dotted module of ``kfp_gpu/**/<module_file>`` in this checkout, e.g. ``kfp_gpu.launcher``.

    The images are built from this checkout, so the module moves with the restructure.

    Raises:
        LookupError: no or several such files.
    """
    root = os.path.join(os.path.dirname(__file__), "..", "..", "kfp_gpu")
    found = []
    for dirpath, _dirs, files in os.walk(root):
        if module_file in files:
            rel = os.path.relpath(os.path.join(dirpath, module_file), os.path.dirname(root))
            found.append(rel[: -len(".py")].replace(os.sep, "."))
    if len(found) != 1:
        raise LookupError(f"expected one kfp_gpu/**/{module_file}, found {found}")
    return found[0]
