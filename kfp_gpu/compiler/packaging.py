"""The distribution's package list, generated from the folders (``pyproject.toml`` keeps a
generated copy: setuptools' ``packages.find`` cannot map ``components/`` and ``pipelines/``
under ``kfp_gpu``, see the ``package-dir`` table there).

``python -m kfp_gpu.compiler.packaging --check`` fails when the list in pyproject.toml differs
from the folders; ``--write`` rewrites it. Tests folders (``*/tests``) are not shipped.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kfp_gpu.inputs import datadir

#: Import prefix -> folder, as pyproject.toml's ``[tool.setuptools] package-dir``.
PACKAGE_DIRS = {"kfp_gpu": "kfp_gpu", "kfp_gpu.components": "components",
                "kfp_gpu.pipelines": "pipelines"}
_LIST = re.compile(r"(?ms)^packages = \[\n.*?^\]\n")


def packages(root: Path) -> list[str]:
    """Every package under the mapped folders of ``root`` (a folder with ``__init__.py``),
    sorted; ``tests`` folders left out."""
    out = set()
    for prefix, folder in PACKAGE_DIRS.items():
        base = root / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if "tests" in rel or "__pycache__" in rel:
                continue
            out.add(".".join((prefix, *rel)))
    return sorted(out)


def render(names: list[str]) -> str:
    """The ``packages = [...]`` TOML block."""
    return "packages = [\n" + "".join(f'  "{n}",\n' for n in names) + "]\n"


def main(argv: list[str] | None = None) -> int:
    """``--check`` (exit 1 and print the expected block when stale) or ``--write``, on the
    ``pyproject.toml`` of the current folder, else of the checkout this package runs from;
    exit 2 with one line when there is neither (an installed package)."""
    args = sys.argv[1:] if argv is None else argv
    root = Path.cwd() if (Path.cwd() / "pyproject.toml").is_file() else datadir.checkout()
    if root is None:
        print(f"error: no pyproject.toml in {Path.cwd()}, and kfp_gpu is not running from a "
              "source checkout: run this in the checkout", file=sys.stderr)
        return 2
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    want = render(packages(root))
    m = _LIST.search(text)
    if m is None:
        print("pyproject.toml has no 'packages = [' block", file=sys.stderr)
        return 2
    if m.group(0) == want:
        return 0
    if "--write" in args:
        pyproject.write_text(text[:m.start()] + want + text[m.end():], encoding="utf-8")
        return 0
    print("pyproject.toml's package list is stale; run python -m kfp_gpu.compiler.packaging "
          f"--write. Expected:\n{want}", file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
