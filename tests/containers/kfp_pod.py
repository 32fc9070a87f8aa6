"""Run one compiled component in its image the way a KFP v2 pod runs it.

What the KFP backend's driver and Argo hand the component container, reproduced with the
docker SDK (kubeflow/pipelines ``backend/src/v2/driver``, kfp 2.17 ``kfp/local``):

- the executor input (``{{$}}``) built from the compiled ComponentSpec with kfp.local's own
  builders (``kfp.local.executor_input_utils.construct_executor_input``,
  ``placeholder_utils.replace_placeholders``), plus the ``task_config`` parameter the driver
  injects for ``task_config_passthroughs`` (``kfp.dsl.executor``: "The backend injects this
  struct under the actual input parameter name");
- the command and args of the compiled executor, unchanged;
- the service account volume at ``/var/run/secrets/kubernetes.io/serviceaccount``
  (``token``, ``ca.crt``, ``namespace``) and ``KUBERNETES_SERVICE_HOST``/``_PORT``, which
  ``kubernetes.config.load_incluster_config`` reads (kubernetes-client/python
  ``kubernetes/config/incluster_config.py``);
- PID 1 behaving as Argo's emissary executor (:mod:`tests.containers.emissary`): SIGTERM
  goes to the command's whole process group, so it reaches the Python process under the
  component's ``sh -ec`` wrapper, and the container ends about a second after ``sh`` does.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
EMISSARY = Path(__file__).with_name("emissary.py")
EMISSARY_AT = "/var/run/argo/emissary.py"


@dataclasses.dataclass(frozen=True)
class ComponentTask:
    """One task ready to start: image, argv, where its outputs go."""

    image: str
    argv: list[str]
    task_root: Path
    executor_input: dict

    def output_uri(self, name: str) -> Path:
        """Where output artifact ``name`` goes (its URI in the executor input)."""
        return Path(self.executor_input["outputs"]["artifacts"][name]["artifacts"][0]["uri"])


def prepare(component_yaml: Path, arguments: dict, task_root: Path,
            task_config: dict | None = None, image: str | None = None) -> ComponentTask:
    """Executor input and argv for ``component_yaml`` (a compiled component).

    Args:
        arguments: parameter values and input artifacts (``dsl.Artifact`` with a ``uri``).
        task_root: folder for the outputs (``<task_root>/<output name>``), mounted at the
            same path in the container.
        task_config: the passthrough struct (``resources``, ``volumes``, ``volumeMounts``
            ... as Kubernetes JSON), or None when the component takes none.
    """
    from kfp import components
    from kfp.local import executor_input_utils, placeholder_utils, utils

    comp = components.load_component_from_file(str(component_yaml))
    spec_pb = comp.pipeline_spec
    name, component_spec = next(iter(spec_pb.components.items()))
    executor = utils.struct_to_executor_spec(
        spec_pb.deployment_spec["executors"][component_spec.executor_label])
    args = dict(arguments)
    if task_config is not None:
        args["task_config"] = task_config
    proto = executor_input_utils.construct_executor_input(
        component_spec=component_spec, arguments=args, task_root=str(task_root),
        block_input_artifact=False)
    as_dict = executor_input_utils.executor_input_to_dict(proto, component_spec)
    argv = placeholder_utils.replace_placeholders(
        full_command=list(executor.container.command) + list(executor.container.args),
        executor_input_dict=as_dict, pipeline_resource_name="chain",
        task_resource_name=name, pipeline_root=str(task_root.parent),
        unique_pipeline_id="chain")
    return ComponentTask(image or executor.container.image, argv, task_root, as_dict)


def service_account(folder: Path, token: str, ca_file: Path, namespace: str) -> Path:
    """Write the three service-account files kubelet projects into a pod; returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_bytes(Path(ca_file).read_bytes())
    (folder / "namespace").write_text(namespace)
    for f in folder.iterdir():
        f.chmod(0o644)
    return folder


def start(client, task: ComponentTask, *, sa_folder: Path, api_host: str, api_port: int,
          network: str, mounts: list, environment: dict | None = None, labels: dict,
          user: str = "1000"):
    """Start the task's container (detached); returns the docker-SDK container."""
    from docker.types import Mount

    env = {"KUBERNETES_SERVICE_HOST": api_host, "KUBERNETES_SERVICE_PORT": str(api_port),
           **(environment or {})}
    binds = [Mount(SA_DIR, str(sa_folder), type="bind", read_only=True),
             Mount(EMISSARY_AT, str(EMISSARY), type="bind", read_only=True),
             Mount(str(task.task_root), str(task.task_root), type="bind"), *mounts]
    return client.containers.run(task.image, task.argv, entrypoint=["python3", EMISSARY_AT],
                                 detach=True, user=user, environment=env, mounts=binds,
                                 network=network, labels=labels)


def executor_output(task: ComponentTask) -> dict:
    """The ``executor_output.json`` the component wrote ({} if none)."""
    path = Path(task.executor_input["outputs"]["outputFile"])
    return json.loads(path.read_text()) if path.exists() else {}
