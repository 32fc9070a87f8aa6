"""The registry chosen at compile time reaches every image the pipeline can start:
`kfp-gpu compile --registry R -o DIR` names R in every image reference of
every compiled YAML (component pods), in the MPIJob and TrainJob the component builds from
the compiled defaults (Launcher, Workers, TrainJob launcher) and in the Trainer runtimes
written to DIR/manifests/trainer and DIR/manifests/trainer-dra (the TrainJob's nodes, for
a ``dra`` request too); nothing reads the registry from the environment at run time."""

from __future__ import annotations

import inspect
import re
import tempfile
from functools import cache
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu import __version__
from kfp_gpu.cli import app
from kfp_gpu.compiler import compile as comp
from kfp_gpu.components.train_resnet_horovod import run_training as rt
from kfp_gpu.mpi.spec import backends, claims, mpijob, trainjob
from kfp_gpu.release import images
from tests.support.kustomize import kustomize

REGISTRY = "registry.example.com/ml"
HOROVOD = f"{REGISTRY}/kfp-gpu-horovod:{__version__}"
#: Anything that looks like a reference to one of our images, inside any string.
OUR_IMAGE = re.compile(r"[\w.:/\[\]-]*kfp-gpu-(?:trainer|horovod|launcher):[\w][\w.-]*")
runner = CliRunner()


#: Where compiled() writes; removed after this module's tests (a pytest-xdist worker ends
#: without running exit finalizers, so TemporaryDirectory's own cleanup is not enough).
_OUT = tempfile.TemporaryDirectory(prefix="kfp-gpu-registry-flow-")


@pytest.fixture(scope="module", autouse=True)
def _remove_compiled():
    yield
    compiled.cache_clear()
    _OUT.cleanup()


@cache
def compiled(env_registry: bool = False) -> Path:
    """DIR after `kfp-gpu compile --registry R -o DIR` (or with $KFP_GPU_REGISTRY=R)."""
    out = Path(_OUT.name) / ("env" if env_registry else "option")
    args, env = ["compile", "-o", str(out)], {}
    if env_registry:
        env["KFP_GPU_REGISTRY"] = REGISTRY
    else:
        args += ["--registry", REGISTRY]
    r = runner.invoke(app, args, env=env)
    assert r.exit_code == 0, r.output
    return out


def yaml_docs(root: Path) -> dict[Path, list]:
    files = sorted([*root.glob("components/*/component.yaml"), *root.glob("pipelines/*.yaml")])
    assert len(files) == len(comp.targets()), files  # every catalog entry
    return {f: [d for d in yaml.safe_load_all(f.read_text()) if d] for f in files}


def strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from strings(v)


def image_values(x):
    """Every string under an ``image`` key in ``x`` (containers, executors, a job's
    ``trainer.image``)."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "image" and isinstance(v, str):
                yield v
            else:
                yield from image_values(v)
    elif isinstance(x, list):
        for v in x:
            yield from image_values(v)


def component_defaults(root: Path) -> dict:
    doc = yaml.safe_load((root / "components" / "train_resnet_horovod" / "component.yaml")
                         .read_text())
    params = doc["root"]["inputDefinitions"]["parameters"]
    return {k: params[k]["defaultValue"] for k in ("image", "runtime_image")}


def options_from(image: str):
    return rt.job_options(
        name="resnet-flow", namespace="ml", image=rt.job_image(image), args=["--x"],
        workers=2, settings=rt.cpu_worker_settings(), rdma=False,
        rdma_resource="rdma/rdma_shared_device_a", multus_networks="", nccl_ib_hca="",
        nccl_net_gdr_level="", nccl_socket_ifname="", shm_size="", run_id="r", task_name="t")


@pytest.mark.parametrize("env_registry", [False, True], ids=["--registry", "$KFP_GPU_REGISTRY"])
def test_every_image_reference_in_every_compiled_yaml_uses_the_registry(env_registry):
    found = []
    for path, docs in yaml_docs(compiled(env_registry)).items():
        text = path.read_text()
        refs = [m for s in strings(docs) for m in OUR_IMAGE.findall(s)]
        refs += OUR_IMAGE.findall("".join(ln for ln in text.splitlines(True)
                                          if ln.startswith("#")))  # the header's defaults
        assert refs, f"{path}: no image reference"
        assert all(r.startswith(f"{REGISTRY}/kfp-gpu-") and r.endswith(f":{__version__}")
                   for r in refs), (path, sorted(set(refs)))
        execs = docs[0]["deploymentSpec"]["executors"]
        containers = {n: ex["container"] for n, ex in execs.items() if "container" in ex}
        assert containers, path  # (importers have no container)
        for name, c in containers.items():
            assert c["image"].startswith(f"{REGISTRY}/kfp-gpu-"), (path, name)
        found += refs
    assert {r.rsplit(":", 1)[0].rsplit("/", 1)[1] for r in found} >= {
        "kfp-gpu-trainer", "kfp-gpu-horovod"}


def test_the_horovod_image_is_a_compiled_constant_and_reaches_launcher_and_workers():
    defaults = component_defaults(compiled())
    assert defaults == {"image": HOROVOD, "runtime_image": HOROVOD}
    # the pipeline's task takes the same compiled default
    pipe = next(yaml.safe_load_all((compiled() / "pipelines" / "resnet_horovod.yaml").read_text()))
    comp_params = pipe["components"]["comp-train-resnet-horovod"]["inputDefinitions"][
        "parameters"]
    assert comp_params["image"]["defaultValue"] == HOROVOD
    # the MPIJob the component builds from it: Launcher and Workers
    job = rt.build_job(backends.MPIJOB, options_from(defaults["image"]),
                       runtime_image=defaults["runtime_image"])
    specs = job["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        assert [c["image"] for c in specs[role]["template"]["spec"]["containers"]] == [HOROVOD]
    assert job == mpijob.build(options_from(defaults["image"]))


def test_the_trainjob_and_the_runtime_written_beside_it_use_the_registry():
    root = compiled()
    (runtime,) = kustomize(root / "manifests" / "trainer")
    node_images = [c["image"] for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
                   for c in r["template"]["spec"]["template"]["spec"]["containers"]]
    assert node_images == [HOROVOD, HOROVOD]
    assert trainjob.runtime_node_image(runtime) == HOROVOD
    defaults = component_defaults(root)
    job = rt.build_job(backends.TRAINJOB, options_from(defaults["image"]),
                       runtime_image=defaults["runtime_image"])
    assert job["spec"]["trainer"]["image"] == HOROVOD
    trainjob.check_runtime_image(job, runtime)  # launcher and nodes: the same image
    # ... which the checked-in runtime (the default registry) is not
    (default_runtime,) = kustomize(comp.repository_root() / "manifests" / "trainer")
    with pytest.raises(ValueError, match="kubeflow/trainer issue 2825"):
        trainjob.check_runtime_image(job, default_runtime)
    # comments and everything but the images are kept
    src = (comp.repository_root() / "manifests" / "trainer" / "horovod-runtime.yaml")
    out = root / "manifests" / "trainer" / "horovod-runtime.yaml"
    assert out.read_text() == src.read_text().replace(images.image("horovod"), HOROVOD)


def _runtime_images(runtime: dict) -> list[str]:
    return [c["image"] for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
            for c in r["template"]["spec"]["template"]["spec"]["containers"]]


def test_both_runtimes_are_written_and_every_image_in_the_output_names_the_registry():
    """A ``dra`` TrainJob runs on kfp-gpu-horovod-dra (kfp_gpu.mpi.spec.claims.DRA_RUNTIME):
    compile writes its kustomization beside the plain runtime's, and every ``image:`` in
    every YAML file written -- and in both runtimes as kustomize renders them from DIR --
    names the registry."""
    root = compiled()
    assert sorted(p.name for p in (root / "manifests").iterdir()) == ["trainer", "trainer-dra"]
    refs = []  # (file, reference): every `image` value, and every string naming our images
    for f in sorted(root.rglob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            refs += [(f.relative_to(root), v) for v in image_values(d)]
            refs += [(f.relative_to(root), m) for v in strings(d) for m in OUR_IMAGE.findall(v)]
    assert {f.parts[0] for f, _ in refs} == {"components", "pipelines", "manifests"}
    assert Path("manifests/trainer/horovod-runtime.yaml") in {f for f, _ in refs}
    assert [(f, r) for f, r in refs if not r.startswith(f"{REGISTRY}/")] == []
    (plain,) = kustomize(root / "manifests" / "trainer")
    (dra,) = kustomize(root / "manifests" / "trainer-dra")
    assert dra["metadata"]["name"] == claims.DRA_RUNTIME
    assert _runtime_images(dra) == _runtime_images(plain) == [HOROVOD, HOROVOD]
    assert trainjob.runtime_node_image(dra) == HOROVOD
    # the DRA runtime is the plain one plus the claim reference in both replicated jobs
    for job in dra["spec"]["template"]["spec"]["replicatedJobs"]:
        assert job["template"]["spec"]["template"]["spec"].pop("resourceClaims") == [
            {"name": "gpu", "resourceClaimTemplateName": claims.DRA_RUNTIME_TEMPLATE}]
    dra["metadata"]["name"] = plain["metadata"]["name"]
    assert dra == plain


def test_the_dra_runtime_written_is_the_checked_in_one_with_the_registry():
    """DIR/manifests/trainer-dra is manifests/trainer-dra: the checked-in folder renders the
    same runtime on the default image (so neither copy can drift from the other)."""
    root = compiled()
    src = comp.repository_root() / "manifests" / "trainer-dra"
    assert sorted(p.name for p in (root / "manifests" / "trainer-dra").iterdir()) == sorted(
        p.name for p in src.iterdir())
    (default_dra,) = kustomize(src)
    (dra,) = kustomize(root / "manifests" / "trainer-dra")
    assert _runtime_images(default_dra) == [images.image("horovod")] * 2
    assert yaml.safe_dump(dra) == yaml.safe_dump(default_dra).replace(
        images.image("horovod"), HOROVOD)


def test_a_custom_image_against_the_compiled_runtime_is_refused_before_anything_is_built():
    defaults = component_defaults(compiled())
    with pytest.raises(ValueError, match="launcher only.*kubectl apply -k DIR/manifests/"):
        rt.build_job(backends.TRAINJOB, options_from("registry.example.com/ml/mine:1"),
                     runtime_image=defaults["runtime_image"])
    # the MPIJob backend has no runtime: any image goes to Launcher and Workers alike
    job = rt.build_job(backends.MPIJOB, options_from("registry.example.com/ml/mine:1"),
                       runtime_image=defaults["runtime_image"])
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "image"] == "registry.example.com/ml/mine:1"


@pytest.mark.parametrize("image", ["", "  "])
def test_an_empty_image_is_a_clear_error(image):
    with pytest.raises(ValueError, match="image is empty: leave the parameter unset"):
        rt.job_image(image)
    with pytest.raises(ValueError, match="runtime_image is empty"):
        rt.build_job(backends.TRAINJOB, options_from(HOROVOD), runtime_image=image)


def test_the_component_pod_derives_no_image_from_the_environment():
    from kfp_gpu.components.train_resnet_horovod.component import train_resnet_horovod

    source = inspect.getsource(train_resnet_horovod.python_func)
    assert "kfp_gpu.release" not in source and "imgs." not in source
    assert "os.environ" not in inspect.getsource(rt.job_image)
    doc = yaml.safe_load((compiled() / "components" / "train_resnet_horovod" /
                          "component.yaml").read_text())
    (ex,) = doc["deploymentSpec"]["executors"].values()
    assert not any("kfp_gpu.release" in s for s in ex["container"]["command"])
    assert "os.environ" not in inspect.getsource(images)


def test_the_default_compile_is_the_checked_in_yaml(tmp_path):
    r = runner.invoke(app, ["compile", "-o", str(tmp_path)], env={"KFP_GPU_REGISTRY": None})
    assert r.exit_code == 0, r.output
    for t in comp.targets():
        rel = t.path.relative_to(comp.package_dir("components" if t.kind == "component"
                                                  else "pipelines"))
        sub = "components" if t.kind == "component" else "pipelines"
        assert (tmp_path / sub / rel).read_text() == t.path.read_text(), t.path
    for f in ("kustomization.yaml", "horovod-runtime.yaml"):
        assert (tmp_path / "manifests" / "trainer" / f).read_text() == (
            comp.repository_root() / "manifests" / "trainer" / f).read_text()


@pytest.mark.parametrize("bad", ["registry.example.com/ml/", "registry example.com/ml"])
def test_a_bad_registry_is_one_line_exit_2(tmp_path, bad):
    r = runner.invoke(app, ["compile", "--registry", bad, "-o", str(tmp_path)])
    assert r.exit_code == 2 and "invalid registry" in r.output and "accepted" in r.output
    assert not list(tmp_path.iterdir())  # refused before anything is written
