"""Shell commands in the docs: run a block as written
with bash, and, for a block that does not run here, check each command against what it
names (CLI options, modules, scripts, make targets, repository paths).

A block runs as one ``bash -e -o pipefail`` script in the sandbox checkout (see
:func:`run_bash`); a line that ends in ``# exit N`` must exit N (bash checks it, the line is
not re-tokenized: :func:`bash_script`). :func:`split_commands` (a small tokenizer) is only
for the static checks of blocks that are not run and for what each command needs
(:mod:`tests.support.doc_needs`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXIT = re.compile(r"#\s*exits?\s+(\d+)\b")
#: Shell words that start a command but are not one (loops, conditionals).
KEYWORDS = {"do", "then", "else", "done", "fi", "for", "if", "while", "in"}
#: Top-level repository entries a relative path in a command may start with.
TOP = tuple(p.name for p in REPO.iterdir() if not p.name.startswith(".git"))
#: Folders commands write into (made by an earlier command, not part of the checkout).
GENERATED = ("build/", "local_outputs/")
#: Variables of this process the docs' commands must not see (the sandbox's own apply).
UNSET = ("KFP_GPU_DATA_DIR", "KUBECONFIG", "REGISTRY", "KFP_HOST",
         # `make test` runs the suite: a docs `make ...` would be a sub-make, which prints
         # "make[1]: Entering directory" lines a reader's top-level make does not
         "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


@dataclass
class Command:
    """One command of a block: ``argv`` after ``env`` assignments; ``expect`` its exit."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    expect: int = 0
    text: str = ""


def logical_lines(source: str) -> list[str]:
    """Lines with ``\\`` continuations joined; blank and comment-only lines dropped."""
    out, buf = [], ""
    for raw in source.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line, buf = buf + line, ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def split_commands(source: str) -> list[Command]:
    """The commands of a shell block: ``&&``, ``;`` and ``|`` separate them; ``A=B cmd``
    sets ``A`` for ``cmd``; ``export A=B`` for the commands after it."""
    commands, exported = [], {}
    for line in logical_lines(source):
        expect = EXIT.search(line)
        words = shlex.split(line, comments=True, posix=True)
        for part in _parts(words):
            env = dict(exported)
            while part and re.fullmatch(r"[A-Za-z_]\w*=.*", part[0]):
                key, _, value = part.pop(0).partition("=")
                env[key] = value
            if part[:1] == ["export"]:
                exported.update(p.partition("=")[::2] for p in part[1:] if "=" in p)
                continue
            if not part:  # NAME=value alone: a shell variable for the commands after it
                exported.update(env)
                continue
            if part or env:
                commands.append(Command(part, env, int(expect.group(1)) if expect else 0, line))
    return commands


def _parts(words: list[str]) -> list[list[str]]:
    parts, cur, loop = [], [], False
    for w in words:
        if w in ("&&", "||", ";", "|") or w.endswith(";") and w != ";":
            if w.endswith(";") and len(w) > 1:
                cur.append(w[:-1])
            if not loop:  # a loop's header (for NAME in WORDS) is no command
                parts.append(cur)
            cur, loop = [], False
        elif not cur and w in KEYWORDS:
            loop = w == "for"
            continue
        else:
            cur.append(w)
    parts.append(cur)
    return [p for p in parts if p]


def program(argv: list[str]) -> tuple[str, list[str]]:
    """``(kind, argv of the program)``: kind ``kfp-gpu``, ``module``, ``script``, ``make``,
    ``pytest``, ``mpirun`` (then the program it starts) or ``other``."""
    if not argv:
        return "other", argv
    head = Path(argv[0]).name
    if head == "mpirun":
        for i, w in enumerate(argv[1:], 1):
            if Path(w).name in ("kfp-gpu", "python", "python3"):
                return program(argv[i:])
        return "other", argv
    if head == "kfp-gpu":
        return "kfp-gpu", argv
    if head == "bash" and len(argv) > 1:
        return "script", argv[1:]
    if head in ("python", "python3"):
        if argv[1:2] == ["-m"]:
            module = argv[2]
            if module in ("kfp_gpu", "kfp_gpu.cli"):
                return "kfp-gpu", ["kfp-gpu", *argv[3:]]
            if module == "kfp_gpu.cli.train_resnet":
                return "kfp-gpu", ["kfp-gpu", "train-resnet", *argv[3:]]
            if module == "pytest":
                return "pytest", argv[2:]
            return "module", argv[2:]
        return "script", argv[1:]
    if head in ("make", "pytest"):
        return head, argv
    if "/" in argv[0] and argv[0].split("/")[0] in TOP:
        return "script", argv
    return "other", argv


def _words(argv: list[str]) -> list[str]:
    """Placeholders out: ``[--keep]`` -> ``--keep``; ``...`` dropped."""
    return [w.strip("[]") for w in argv if w.strip("[]") and w.strip("[]") != "..."]


@functools.cache
def _click_root():
    import typer.main

    from kfp_gpu.cli import app

    return typer.main.get_command(app)


def _option_names(command) -> set[str]:
    names = {"--help"}
    for p in command.params:
        names.update(getattr(p, "opts", ()))
        names.update(getattr(p, "secondary_opts", ()))
    return names


def check_kfp_gpu(argv: list[str]) -> list[str]:
    """Problems with a ``kfp-gpu ...`` command line: unknown subcommands or options."""
    command, words, path = _click_root(), _words(argv[1:]), "kfp-gpu"
    allowed = _option_names(command)
    while words and hasattr(command, "commands"):
        w = words[0]
        if w.startswith("-"):
            if w.split("=")[0] not in allowed:
                return [f"{path} has no option {w}"]
            words.pop(0)
            continue
        if w.isupper():  # a placeholder such as COMMAND
            return []
        sub = command.commands.get(w)
        if sub is None:
            return [f"{path} has no command {w!r}; it has {sorted(command.commands)}"]
        command, path = sub, f"{path} {w}"
        allowed = _option_names(command)
        words.pop(0)
    return [f"{path} has no option {w}" for w in words
            if w.startswith("-") and len(w) > 1 and w.split("=")[0] not in allowed]


def check_command(cmd: Command) -> list[str]:
    """What in ``cmd`` does not exist: options of our CLI, modules, scripts and their
    options, make targets, pytest markers and paths, repository paths of other tools."""
    kind, argv = program(cmd.argv)
    if kind == "kfp-gpu":
        return check_kfp_gpu(argv)
    if kind == "module":
        spec = importlib.util.find_spec(argv[0])
        if spec is None:
            return [f"no module {argv[0]}"]
        return _options_in(Path(spec.origin), argv[1:])
    if kind == "script":
        path = REPO / argv[0]
        return [f"no file {argv[0]}"] if not path.is_file() else _options_in(path, argv[1:])
    if kind == "make":
        text = (REPO / "Makefile").read_text(encoding="utf-8")
        return [f"no make target {t}" for t in argv[1:] if "=" not in t
                and not re.search(rf"^{re.escape(t)}:", text, re.MULTILINE)]
    if kind == "pytest":
        return _pytest_problems(argv[1:])
    return [f"no file or folder {w}" for w in _paths(cmd.argv) if not (REPO / w).exists()]


def _options_in(source: Path, args: list[str]) -> list[str]:
    text = source.read_text(encoding="utf-8")
    return [f"{source.relative_to(REPO) if source.is_relative_to(REPO) else source} "
            f"has no option {w}" for w in _words(args)
            if w.startswith("--") and w.split("=")[0] not in text]


def _pytest_problems(args: list[str]) -> list[str]:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    markers = set(re.findall(r'^\s*"(\w+):', text, re.MULTILINE))
    out = []
    for i, w in enumerate(args):
        if args[i - 1:i] == ["-m"]:
            out += [f"no pytest marker {m}" for m in re.findall(r"\w+", w)
                    if m not in markers | {"not", "and", "or"}]
        elif not w.startswith("-") and not (REPO / w.split("::")[0]).exists():
            out.append(f"no test path {w}")
    return out


def _paths(argv: list[str]) -> list[str]:
    """Relative repository paths among the words (``-k DIR``, ``-f FILE`` ...)."""
    out = []
    for w in argv:
        w = w.split("=", 1)[-1] if w.startswith("--") else w
        if (w.split("/")[0] in TOP and "/" in w and not w.startswith(GENERATED)
                and not re.search(r"[$*<>{}]", w)):
            out.append(w.rstrip("/"))
    return out


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a docs command: this one without :data:`UNSET`, the venv's ``bin``
    first on ``PATH`` (``kfp-gpu``, ``python``, ``mpirun`` are the checkout's), Open MPI
    allowed to run as root when this is root (what the docs' "as root add
    --allow-run-as-root" says), then ``extra`` (the block's capabilities and directives)."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra or {})
    return env


def bash_script(source: str) -> str:
    """A shell block as a ``bash -e -o pipefail`` script: the block as written, except that a
    line ending in ``# exit N`` (N > 0; with its ``\\`` continuation lines) becomes
    ``if LINE; then rc=0; else rc=$?; fi`` followed by a check that ``rc`` is N."""
    out, buf = ["set -e -o pipefail"], []
    for raw in source.splitlines():
        buf.append(raw)
        if raw.rstrip().endswith("\\"):
            continue
        line, buf = "\n".join(buf), []
        m = EXIT.search(line.splitlines()[-1])
        if m and int(m.group(1)):
            want = int(m.group(1))
            command = line[:line.rindex("#")].rstrip()
            out.append(f"if {command}\nthen __rc=0; else __rc=$?; fi\n"
                       f"[ \"$__rc\" -eq {want} ] || {{ echo \"docs: exited $__rc, the "
                       f"page says {want}\" >&2; exit 1; }}")
        else:
            out.append(line)
    out += buf
    return "\n".join(out) + "\n"


def run_bash(script: str, cwd: Path, env: dict[str, str],
             timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run ``script`` with bash in ``cwd``: stdout and stderr together in ``stdout``."""
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, check=False)
