"""kfp-gpu: Kubeflow Pipelines (KFP v2) components and pipelines for GPU training.

Import root of the distribution ``kfp-gpu``. The component folders are mapped to
``kfp_gpu.components`` and the pipelines to ``kfp_gpu.pipelines`` (see pyproject.toml);
docs/architecture.md shows the packages and how a GPU request flows to a pod spec.

The public API is :data:`__all__`. Names load on first use (PEP 562 ``__getattr__``), so
``import kfp_gpu`` imports neither TensorFlow, the Kubernetes client nor typer.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

from kfp_gpu._compat import restore_message_factory_get_prototype

__version__ = "0.1.0"

restore_message_factory_get_prototype()

#: Public name -> (module, attribute); attribute None = the module itself.
_PUBLIC: dict[str, tuple[str, str | None]] = {
    # subpackages
    "gpu": ("kfp_gpu.gpu", None),
    "mpi": ("kfp_gpu.mpi", None),
    "training": ("kfp_gpu.training", None),
    "cluster": ("kfp_gpu.cluster", None),
    "compiler": ("kfp_gpu.compiler", None),
    "release": ("kfp_gpu.release", None),
    "parameters": ("kfp_gpu.parameters", None),
    "inputs": ("kfp_gpu.inputs", None),
    # GPU requests: text form -> task settings / pod fragment; runtime memory cap
    "GpuRequest": ("kfp_gpu.gpu.request", "GpuRequest"),
    "parse_gpu_request": ("kfp_gpu.gpu.request", "parse"),
    "apply_gpu_share": ("kfp_gpu.gpu.memory_cap", "apply_gpu_share"),
    # MPIJobs: options -> spec -> launched job
    "MPIJobOptions": ("kfp_gpu.mpi.spec.options", "MPIJobOptions"),
    "build_mpijob": ("kfp_gpu.mpi.spec.mpijob", "build"),
    "job_name": ("kfp_gpu.mpi.spec.names", "job_name"),
    "launch": ("kfp_gpu.mpi.launch.launcher", "launch"),
    # runtime images (tag = package version)
    "image": ("kfp_gpu.release.images", "image"),
}

# "__version__" and the keys of _PUBLIC (tests/test_architecture.py checks they agree).
__all__ = [
    "GpuRequest",
    "MPIJobOptions",
    "__version__",
    "apply_gpu_share",
    "build_mpijob",
    "cluster",
    "compiler",
    "gpu",
    "image",
    "inputs",
    "job_name",
    "launch",
    "mpi",
    "parameters",
    "parse_gpu_request",
    "release",
    "training",
]

#: Import paths before issue 38 -> the module's place now. ``import kfp_gpu.storage``,
#: ``from kfp_gpu.build import images`` and the attributes ``kfp_gpu.build`` /
#: ``kfp_gpu.storage`` keep working, each old name warning once (DeprecationWarning) with
#: its new path (:class:`_MovedModules`); no file is left at the old places.
_MOVED: dict[str, str] = {
    "kfp_gpu.build": "kfp_gpu.compiler, kfp_gpu.release and kfp_gpu.parameters",
    "kfp_gpu.build.compile": "kfp_gpu.compiler.compile",
    "kfp_gpu.build.digests": "kfp_gpu.release.digests",
    "kfp_gpu.build.images": "kfp_gpu.release.images",
    "kfp_gpu.build.ir_checks": "kfp_gpu.compiler.ir_checks",
    "kfp_gpu.build.k8s_rules": "kfp_gpu.compiler.k8s_rules",
    "kfp_gpu.build.packaging": "kfp_gpu.compiler.packaging",
    "kfp_gpu.build.parameters": "kfp_gpu.parameters.declared",
    "kfp_gpu.build.params": "kfp_gpu.parameters.command_line",
    "kfp_gpu.build.registry": "kfp_gpu.compiler.registry",
    "kfp_gpu.build.task_settings": "kfp_gpu.compiler.task_settings",
    "kfp_gpu.datadir": "kfp_gpu.inputs.datadir",
    "kfp_gpu.input_checks": "kfp_gpu.inputs.checks",
    "kfp_gpu.input_errors": "kfp_gpu.inputs.errors",
    "kfp_gpu.storage": "kfp_gpu.inputs.storage",
}


def _importer_stacklevel() -> int:
    """``warnings.warn``'s stacklevel for the import statement that reached the finder: the
    first frame outside importlib and this module (warnings skips importlib's bootstrap
    frames itself)."""
    level, frame = 1, sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not ("importlib" in filename and "_bootstrap" in filename):
            level += 1
            if filename not in (__file__, importlib.__file__):
                break
        frame = frame.f_back
    return level


def _stand_in_attribute(package: str, name: str):
    """An attribute of a stand-in package (``kfp_gpu.build.images``): the moved module."""
    if f"{package}.{name}" not in _MOVED:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves each old name of :data:`_MOVED` as the module at its new path (the same module
    object); ``kfp_gpu.build``, now three packages, is a stand-in whose attributes are its
    former modules."""

    def find_spec(self, fullname, path=None, target=None):
        """A spec for an old name of :data:`_MOVED`; None for every other name."""
        if fullname not in _MOVED:
            return None
        package = any(old.startswith(fullname + ".") for old in _MOVED)
        return importlib.util.spec_from_loader(fullname, self, is_package=package)

    def create_module(self, spec):
        """Warn, then return the module at the new path (or the stand-in package)."""
        new = _MOVED[spec.name]
        warnings.warn(f"{spec.name} is deprecated: it moved to {new} (issue 38)",
                      DeprecationWarning, stacklevel=_importer_stacklevel())
        if spec.submodule_search_locations is not None:
            module = types.ModuleType(spec.name, f"Deprecated: moved to {new}.")
            module.__getattr__ = lambda name: _stand_in_attribute(spec.name, name)
            return module
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing runs; the real module gets back its own spec (the import system set the
        old name's)."""
        if module.__spec__.loader_state is not None:
            module.__spec__ = module.__spec__.loader_state


sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_MovedModules"]
sys.meta_path.insert(0, _MovedModules())


def __getattr__(name: str):
    if f"{__name__}.{name}" in _MOVED:  # kfp_gpu.build, kfp_gpu.storage: deprecated
        return importlib.import_module(f"{__name__}.{name}")
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'kfp_gpu' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
