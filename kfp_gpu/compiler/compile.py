"""Compile every component and pipeline of the catalog (:mod:`kfp_gpu.catalog.discover`) to
YAML, or check they are current.

The image registry and tag are arguments (``compile_all(..., registry=R)``), applied to each
compiled document by :func:`kfp_gpu.release.images.apply` (KFP has no compile-time image
hook: components are decorated with the default :class:`~kfp_gpu.release.images.ImageSet`);
nothing here reads or writes the process environment. With ``output_dir`` the Trainer
runtimes (manifests/trainer and manifests/trainer-dra) are written beside the YAML with the
same images (:func:`write_runtime_manifests`), so a TrainJob's launcher and nodes pull the
same image, whichever runtime its GPU request picks.
"""

from __future__ import annotations

import difflib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kfp_gpu import __version__
from kfp_gpu.catalog import discover, params
from kfp_gpu.dsl import task_settings
from kfp_gpu.inputs import storage
from kfp_gpu.release import images

if TYPE_CHECKING:
    from kfp_gpu.gpu import GpuRequest

log = logging.getLogger(__name__)
#: The Trainer runtimes' kustomize folders, relative to the repository root: the
#: ClusterTrainingRuntime ``kfp-gpu-horovod`` (manifests/trainer) and
#: ``kfp-gpu-horovod-dra`` (manifests/trainer-dra: the same runtime plus the claim reference
#: a ``dra`` request needs, :data:`kfp_gpu.mpi.spec.claims.DRA_RUNTIME`), which kustomize
#: builds from ``../trainer``; written side by side, the DRA one renders with the images
#: written into the plain one.
RUNTIME_MANIFESTS = (Path("manifests") / "trainer", Path("manifests") / "trainer-dra")


@dataclass(frozen=True)
class Target:
    """One compiled YAML: ``kind`` is ``component`` or ``pipeline``."""

    kind: str
    name: str
    ref: str
    path: Path


def package_dir(subpackage: str) -> Path:
    """Folder of ``kfp_gpu.components`` / ``kfp_gpu.pipelines`` (the repo folder when editable)."""
    return discover.package_dir(f"kfp_gpu.{subpackage}")


def targets(output_dir: Path | None = None, only: str | None = None) -> list[Target]:
    """Where each catalog entry compiles to (package locations, or under ``output_dir``).

    Raises:
        ValueError: ``only`` is not a catalog name (naming the accepted names).
    """
    comp_root = output_dir / "components" if output_dir else package_dir("components")
    pipe_root = output_dir / "pipelines" if output_dir else package_dir("pipelines")
    out = [Target("component", n, r, comp_root / n / "component.yaml")
           for n, r in discover.COMPONENTS.items()]
    out += [Target("pipeline", n, r, pipe_root / f"{n.replace('-', '_')}.yaml")
            for n, r in discover.PIPELINES.items()]
    if only:
        names = [t.name for t in out]
        if only not in names:
            raise ValueError(f"unknown component or pipeline {only!r}; accepted: {names}")
        out = [t for t in out if t.name == only]
    return out


def compile_target(t: Target, dest: Path, gpu: GpuRequest | str | None = None,
                   image_set: images.ImageSet | None = None,
                   settings: task_settings.TaskSettings | None = None) -> None:
    """Compile one target to ``dest``; pipelines get the GPU request ``gpu`` (a
    :class:`kfp_gpu.gpu.GpuRequest`, as ``kfp-gpu compile --gpu`` parsed it, or its text;
    each pipeline's ``build`` takes either) if given and
    the task ``settings`` (:mod:`kfp_gpu.dsl.task_settings`) if not the default; every
    image reference of the default set becomes ``image_set``'s (default: unchanged)."""
    storage.write_text(dest, compile_text(t, gpu, image_set, settings))


def compile_text(t: Target, gpu: GpuRequest | str | None = None,
                 image_set: images.ImageSet | None = None,
                 settings: task_settings.TaskSettings | None = None) -> str:
    """The YAML text :func:`compile_target` writes (nothing is written)."""
    from kfp import compiler

    obj = (discover.entry(t.name).pipeline(gpu, settings) if t.kind == "pipeline"
           else discover.component(t.name))
    with tempfile.TemporaryDirectory(prefix="kfp-gpu-compile-") as tmp:
        raw = Path(tmp) / t.path.name
        compiler.Compiler().compile(obj, str(raw))
        if t.kind == "pipeline":  # patterns KFP's backend cannot run (ValueError, exit 2)
            import yaml

            from kfp_gpu.compiler import ir_checks
            ir_checks.check(list(yaml.safe_load_all(raw.read_text(encoding="utf-8"))), t.name)
        return with_images(raw.read_text(encoding="utf-8"), image_set or images.ImageSet())


def with_images(text: str, image_set: images.ImageSet,
                source: images.ImageSet | None = None) -> str:
    """KFP's compiled YAML ``text`` with :func:`kfp_gpu.release.images.apply` applied to each
    document, written back the way KFP writes it (kfp 2.17
    ``compiler/pipeline_spec_builder.py`` write_pipeline_spec_to_file: the comment header,
    then ``yaml.dump_all(documents, sort_keys=True)``); the references in the header's
    comments (the inputs' defaults) are renamed too. With the default set the text comes
    back unchanged (``compile --check`` pins that). ``source`` (default: the default set) is
    the set ``text`` names, e.g. the tag set when pinning its digests."""
    import yaml

    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    header, body = "".join(lines[:n]), "".join(lines[n:])
    header = images.rename_text(header, image_set, source)
    docs = [images.apply(d, image_set, source) for d in yaml.safe_load_all(body)]
    return header + yaml.dump_all(docs, sort_keys=True)


def repository_root() -> Path:
    """The source checkout the packages live in (``components/``'s parent when installed
    editable, as in this repository)."""
    return package_dir("components").parent


def has_runtime_manifests(root: Path | None = None) -> bool:
    """Whether every folder of :data:`RUNTIME_MANIFESTS` has its kustomization.yaml under
    ``root`` (default: :func:`repository_root`); False in a wheel install."""
    root = root or repository_root()
    return all((root / folder / "kustomization.yaml").is_file() for folder in RUNTIME_MANIFESTS)


def write_runtime_manifests(output_dir: Path, image_set: images.ImageSet) -> list[Path]:
    """Write the Trainer runtime kustomizations (:data:`RUNTIME_MANIFESTS`: manifests/trainer
    and manifests/trainer-dra) under ``output_dir/manifests/`` with ``image_set``'s images:
    the files as they are, comments kept, each default-set reference renamed
    (:func:`kfp_gpu.release.images.rename_text`, checked against
    :func:`kfp_gpu.release.images.apply` on the parsed documents). So ``kubectl apply -k
    DIR/manifests/trainer`` installs the ClusterTrainingRuntime ``kfp-gpu-horovod`` on the
    image the compiled YAML's ``runtime_image`` names (Kubeflow Trainer v2.3 gives
    ``trainer.image`` to the launcher only, plugins/jobset/builder.go ``Trainer()``; the
    nodes run the runtime's image: :func:`kfp_gpu.mpi.spec.trainjob.check_runtime_image`),
    and ``kubectl apply -k DIR/manifests/trainer-dra`` installs ``kfp-gpu-horovod-dra``,
    which kustomize builds from the ``../trainer`` written beside it, on the same image.

    Returns:
        The written paths; [] when the folders are not there (a wheel install, not a
        source checkout; then the kustomize ``images:`` entry of docs/cluster.md applies).

    Raises:
        ValueError: a file in which renaming the text changed more than the images.
    """
    if not has_runtime_manifests():
        log.warning("%s not found (not a source checkout): install the Trainer runtimes "
                    "with a kustomize images: entry for %s", ", ".join(
                        str(repository_root() / f) for f in RUNTIME_MANIFESTS),
                    image_set.image(images.HOROVOD))
        return []
    texts = runtime_manifest_texts(output_dir, image_set)
    for path, text in texts.items():
        storage.write_text(path, text)
    return list(texts)


def runtime_manifest_texts(output_dir: Path, image_set: images.ImageSet,
                           root: Path | None = None) -> dict[Path, str]:
    """What :func:`write_runtime_manifests` writes, ``{path under output_dir: text}`` for
    every YAML file of each :data:`RUNTIME_MANIFESTS` folder under ``root`` (default:
    :func:`repository_root`), nothing written.

    Raises:
        ValueError: as :func:`write_runtime_manifests`.
    """
    import yaml

    root = root or repository_root()
    texts = {}
    for folder in RUNTIME_MANIFESTS:
        for f in sorted((root / folder).glob("*.yaml")):
            text = f.read_text(encoding="utf-8")
            renamed = images.rename_text(text, image_set)
            expected = [images.apply(d, image_set) for d in yaml.safe_load_all(text)]
            if list(yaml.safe_load_all(renamed)) != expected:
                raise ValueError(f"{f}: renaming the images in the text changed more than "
                                 "the images; fix the file")
            texts[output_dir / folder / f.name] = renamed
    return texts


def _check_parent(output_dir: Path) -> None:
    """Refuse an output folder whose nearest existing ancestor is not a folder (``-o
    /dev/null/x``: ``mkdir`` would say only "File exists: /dev/null").

    Raises:
        ValueError: naming the ancestor that is not a folder.
    """
    parent = output_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--output-dir {output_dir}: {parent} is not a folder, so nothing "
                         "can be created under it; name a folder")


def _write_all(files: dict[Path, str], output_dir: Path | None) -> list[Path]:
    """Write every compiled text once all of them exist (never a mixed
    output folder). With ``output_dir`` the whole set is written into a temp folder beside
    it first: a new ``output_dir`` is that folder renamed (one ``rename(2)``), an existing
    one gets each file moved in with ``os.replace`` (files of its own it had stay). Without
    it (the package folders) each file is replaced atomically (:func:`kfp_gpu.inputs.storage.
    write_text`). On any error the temp folder is removed and nothing is moved.

    Returns:
        The final paths, in ``files`` order.
    """
    if output_dir is None:
        for path, text in files.items():
            storage.write_text(path, text)
        return list(files)
    output_dir = Path(output_dir)
    _check_parent(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.compile-", dir=output_dir.parent))
    try:
        for path, text in files.items():
            staged = stage / path.relative_to(output_dir)
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_text(text, encoding="utf-8")
        if not output_dir.exists():
            os.chmod(stage, 0o777 & ~_umask())  # mkdtemp's 0700 -> what mkdir would give
            stage.rename(output_dir)
            return list(files)
        for path in files:  # every move can happen before the first one does
            blocked = _in_the_way(path, output_dir)
            if blocked is not None:
                raise ValueError(f"--output-dir {output_dir}: cannot write {path} ({blocked} "
                                 "is in the way); remove it or name another folder")
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / path.relative_to(output_dir), path)
        return list(files)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _in_the_way(path: Path, output_dir: Path) -> Path | None:
    """A folder where the file ``path`` goes, or a non-folder where one of its folders
    under ``output_dir`` goes; None when the move can happen."""
    if path.is_dir():
        return path
    for rel in path.relative_to(output_dir).parents:
        if (output_dir / rel).exists() and not (output_dir / rel).is_dir():
            return output_dir / rel
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def compile_all(output_dir: Path | None = None, gpu: GpuRequest | str | None = None,
                only: str | None = None, registry: str | None = None,
                tag: str | None = None, pin_digests: bool = False,
                settings: task_settings.TaskSettings | None = None) -> list[Path]:
    """Compile the catalog with the images of ``ImageSet(registry, tag)`` (defaults: the
    default registry, the package version); returns the written paths. With
    ``output_dir`` the Trainer runtimes are written too (:func:`write_runtime_manifests`)
    when a compiled YAML names the Horovod image (it can start a TrainJob).

    ``pin_digests``: the images the compiled YAML names are resolved in
    the registry (:func:`kfp_gpu.release.digests.pin`, before anything is written) and every
    reference -- executors, the MPIJob/TrainJob ``image``/``runtime_image`` defaults,
    DIR/manifests/trainer (which DIR/manifests/trainer-dra builds on) -- becomes
    ``R/kfp-gpu-<name>@sha256:...``.

    ``settings`` (``--secret-env``/``--pvc``/``--secret-volume``/``--resources``,
    :mod:`kfp_gpu.dsl.task_settings`) go on every task of every compiled pipeline.

    Raises:
        ValueError: a bad registry or tag (:class:`kfp_gpu.release.images.ImageSet`), a
            non-default one (or ``pin_digests``, or ``settings``) without ``output_dir``
            (the package's YAML is the default build), an unknown ``only``, ``settings``
            with no pipeline compiled, ``--resources`` naming no task of the compiled
            pipelines (the message lists the accepted names).
        kfp_gpu.release.digests.ImageMissing / RegistryUnreachable: with ``pin_digests``.
    """
    image_set = images.ImageSet(registry or images.DEFAULT_REGISTRY, tag or __version__)
    if output_dir is not None and Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise ValueError(f"--output-dir {output_dir}: exists and is not a folder; name a "
                         "folder (it is created when missing)")
    settings = settings or task_settings.DEFAULT
    if (image_set != images.ImageSet() or pin_digests or not settings.is_default()) \
            and output_dir is None:
        raise ValueError("a registry or tag other than the default, --pin-digests, or task "
                         "settings (--secret-env/--pvc/--secret-volume/--resources) need an "
                         "output folder: the package's checked-in YAML stays the default build")
    chosen = targets(output_dir, only)
    if not settings.is_default():
        _check_settings(settings, chosen)
    compiled = {t.path: compile_text(t, gpu if t.kind == "pipeline" else None, image_set,
                                     settings if t.kind == "pipeline" else None)
                for t in chosen}
    if pin_digests:
        from kfp_gpu.release import digests

        tagged = image_set
        image_set = digests.pin(tagged, images.referenced(compiled.values(), tagged))
        compiled = {p: with_images(text, image_set, tagged) for p, text in compiled.items()}
    horovod = image_set.image(images.HOROVOD)
    if output_dir is not None and any(horovod in text for text in compiled.values()):
        # only beside YAML that can start a TrainJob on the runtime (its Horovod image)
        if has_runtime_manifests():
            compiled.update(runtime_manifest_texts(output_dir, image_set))
        else:
            write_runtime_manifests(output_dir, image_set)  # logs where to get it; []
    return _write_all(compiled, output_dir)


def _check_settings(settings: task_settings.TaskSettings, chosen: list[Target]) -> None:
    """Refuse task settings that would reach no task: no pipeline among ``chosen`` (a
    component's YAML carries no Kubernetes settings), or ``--resources`` naming no task of
    the chosen pipelines.

    Raises:
        ValueError: one line naming the accepted pipelines or task names.
    """
    pipelines = {t.name: t.ref for t in chosen if t.kind == "pipeline"}
    if not pipelines:
        raise ValueError("--secret-env/--pvc/--secret-volume/--resources apply to pipeline "
                         "tasks; --only names a component: name a pipeline ("
                         + discover.accepted() + ") or leave --only out")
    names = {n for tasks in params.default_resources(pipelines).values() for n in tasks}
    settings.check_tasks(names)


def check_all(only: str | None = None) -> list[str]:
    """Recompile into a temporary folder and diff against the checked-in YAML.

    The checked-in YAML is the default build (default registry and tag).

    Returns:
        One message (with a short unified diff) per stale or missing file; [] if current.
    """
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in targets(None, only):
            fresh = Path(tmp) / f"{t.kind}-{t.name}.yaml"
            compile_target(t, fresh)
            if not t.path.exists():
                problems.append(f"{t.path}: missing (run `kfp-gpu compile`)")
                continue
            old, new = t.path.read_text().splitlines(), fresh.read_text().splitlines()
            if old != new:
                diff = list(difflib.unified_diff(old, new, str(t.path), "compiled", n=1,
                                                 lineterm=""))
                problems.append(f"{t.path}: stale (run `kfp-gpu compile`)\n"
                                + "\n".join(diff[:20]))
    return problems


def compiled_pipeline(ref: str) -> tuple[Path, str]:
    """Registry pipeline name or YAML path -> (compiled YAML path, pipeline display name).

    Raises:
        ValueError: neither a registry pipeline nor an existing YAML file (names the
            registry's pipelines).
    """
    if ref in discover.PIPELINES:
        path = targets(only=ref)[0].path
        if not path.is_file():
            raise ValueError(f"compiled YAML for {ref!r} missing at {path}; run "
                             "`kfp-gpu compile`")
        return path, ref
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        import yaml

        doc = next(iter(yaml.safe_load_all(path.read_text())), None) or {}
        name = doc.get("pipelineInfo", {}).get("name") or path.stem.replace("_", "-")
        return path, name
    raise ValueError(f"unknown pipeline {ref!r}; accepted: a catalog pipeline "
                     f"({discover.accepted()}) or a compiled .yaml file")
