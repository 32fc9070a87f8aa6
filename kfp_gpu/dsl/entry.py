"""A pipeline of the catalog as one typed object (:class:`PipelineEntry`).

Each ``pipelines/<module>.py`` exports ``ENTRY = PipelineEntry(...)`` and nothing else the
rest of the package reads: :mod:`kfp_gpu.catalog` finds the entries, ``kfp-gpu compile``,
``run --local``, ``submit`` and ``params`` read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kfp_gpu.dsl.parameters import Param
from kfp_gpu.dsl.task_settings import Resources


@dataclass(frozen=True)
class PipelineEntry:
    """One catalog pipeline.

    Attributes:
        name: the catalog name (``imdb-lstm``); the module is the name with ``_``.
        build: ``build(gpu=default_gpu, settings=None, **extra) -> @dsl.pipeline``
            function: the factory taking the GPU request (text or
            :class:`kfp_gpu.gpu.GpuRequest`) and the task settings
            (:class:`kfp_gpu.dsl.task_settings.TaskSettings`).
        parameters: the parameter declaration (:func:`kfp_gpu.dsl.parameters.declare`).
        default_gpu: the GPU request text of the checked-in YAML (``gpu:1``).
        local_data: ``(parameter, path under the data folder)`` that ``kfp-gpu run --local
            --data-dir`` fills, or None.
        local_checks: parameter -> cheap check of a local input file (raises), run by
            ``run --local`` before any task starts.
        task_resources: task display name -> default CPU/memory
            (``kfp-gpu compile --resources`` overrides them).
        spec_check: ``check(spec, values)`` of run arguments against the compiled IR
            (raises ValueError), or None.
    """

    name: str
    build: Callable
    parameters: Mapping[str, Param]
    default_gpu: str
    local_data: tuple[str, str] | None = None
    local_checks: Mapping[str, Callable[[str], None]] = field(default_factory=dict)
    task_resources: Mapping[str, Resources] = field(default_factory=dict)
    spec_check: Callable | None = None

    def __post_init__(self):
        for name in ("parameters", "local_checks", "task_resources"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def pipeline(self, gpu=None, settings=None):
        """The ``@dsl.pipeline`` function for ``gpu`` (None: :attr:`default_gpu`) and task
        ``settings`` (None or default: none).

        Raises:
            ValueError: an invalid GPU request or settings (from :attr:`build`).
        """
        kwargs = {"settings": settings} if settings is not None and not settings.is_default() \
            else {}
        return self.build(gpu, **kwargs) if gpu else self.build(**kwargs)
