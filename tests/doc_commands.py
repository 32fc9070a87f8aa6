"""Shell commands in the docs: split a block into commands, check each one parses against
what it names (CLI options, modules, scripts, make targets, repository paths), and run the
ones that need no cluster, engine or GPU with small parameters (issue 32 item 1).

A block that cannot run here says why on a line of its own, ``# needs: <reason>`` (a
cluster, Docker, a GPU, a registry, minutes of CPU); its commands are only checked. A
command's expected exit status other than 0 is a trailing ``# exit N``.
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

REPO = Path(__file__).resolve().parents[1]
NEEDS = re.compile(r"^\s*#\s*needs:\s*(\S.*)$", re.MULTILINE)
EXIT = re.compile(r"#\s*exits?\s+(\d+)\b")
#: Shell words that start a command but are not one (loops, conditionals).
KEYWORDS = {"do", "then", "else", "done", "fi", "for", "if", "while", "in"}
#: Top-level repository entries a relative path in a command may start with.
TOP = tuple(p.name for p in REPO.iterdir() if not p.name.startswith(".git"))
#: Folders commands write into (made by an earlier command, not part of the checkout).
GENERATED = ("build/", "local_outputs/")
#: Small parameters appended to a runnable command (the last value of an option wins), so
#: the docs' commands run in seconds on 2 cores: (command prefix, extra arguments).
SMALL: list[tuple[tuple[str, ...], list[str]]] = [
    (("kfp-gpu", "run", "imdb-lstm"),
     ["-p", "max_rows_per_split=300", "-p", "epochs=1", "-p", "embedding_dim=16",
      "-p", "lstm_units=16", "-p", "accuracy_threshold=0"]),
    (("kfp-gpu", "run", "resnet-horovod"),
     ["-p", "max_rows_per_split=200", "-p", "epochs=1", "-p", "steps_per_epoch=2",
      "-p", "batch_size=16", "-p", "width=8", "-p", "blocks=1", "-p", "accuracy_threshold=0"]),
    (("kfp-gpu", "train-resnet"),
     ["--model", "small", "--image-size", "32", "--classes", "10", "--steps", "2",
      "--warmup-steps", "1", "--batch-size", "16", "--epochs", "1", "--width", "8",
      "--blocks", "1"]),
]


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
    parts, cur = [], []
    for w in words:
        if w in ("&&", "||", ";", "|") or w.endswith(";") and w != ";":
            if w.endswith(";") and len(w) > 1:
                cur.append(w[:-1])
            parts.append(cur)
            cur = []
        elif not cur and w in KEYWORDS:
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


#: What the doc tests run: our CLI, Python modules and Python scripts (shell scripts, make,
#: kubectl, docker ... need a ``# needs:`` line).
RUNNABLE = {"kfp-gpu", "module", "script"}


#: ``kfp-gpu`` commands that talk to a cluster, a registry or a Docker engine: run only
#: when the doc says they fail (``# exit N``, N > 0: e.g. doctor without a kubeconfig).
OUTSIDE = ("doctor", "submit", "mpijob", "trainjob", "--pin-digests", "--runner")


def runnable(argv: list[str], expect: int = 0) -> bool:
    """Whether the doc tests may run ``argv`` (see :data:`RUNNABLE`, :data:`OUTSIDE`)."""
    kind, prog = program(argv)
    if kind == "kfp-gpu" and any(w in OUTSIDE for w in prog) and not expect:
        return False
    return kind in RUNNABLE and (kind != "script" or prog[0].endswith(".py"))


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


def small(argv: list[str]) -> list[str]:
    """``argv`` of a ``kfp-gpu`` command with the :data:`SMALL` parameters appended."""
    for prefix, extra in SMALL:
        if tuple(argv[:len(prefix)]) == prefix:
            return [*argv, *extra]
    return argv


#: Placeholders the docs use for what an earlier command wrote (newest match in the sandbox).
PLACEHOLDERS = {"MODEL_DIR": "local_outputs/imdb-lstm-*/train-text-classifier/model",
                "TEST_DIR": "local_outputs/imdb-lstm-*/prep-text/test_data"}


def _filled(word: str, cwd: Path) -> str:
    for name, pattern in PLACEHOLDERS.items():
        if name in word:
            found = sorted(cwd.glob(pattern), key=lambda p: p.stat().st_mtime)
            assert found, f"{name}: nothing at {pattern} (run the imdb-lstm block first)"
            word = word.replace(name, str(found[-1]))
    return word


def run(cmd: Command, cwd: Path, tmp: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``cmd`` in ``cwd`` (a sandbox beside ``shared/data``): ``kfp-gpu`` commands get
    :data:`SMALL` parameters, ``/tmp/...`` arguments move under ``tmp``,
    :data:`PLACEHOLDERS` are filled in, mpirun gets
    ``--allow-run-as-root`` as root, and the venv's ``bin`` leads ``PATH``."""
    argv = [str(tmp / w[len("/tmp/"):]) if w.startswith("/tmp/") else _filled(w, cwd)
            for w in cmd.argv]
    kind, prog = program(argv)
    if kind == "kfp-gpu" and prog[0] == "kfp-gpu":
        argv = argv[:len(argv) - len(prog)] + small(prog)
    if Path(argv[0]).name == "mpirun" and os.geteuid() == 0 and "--allow-run-as-root" not in argv:
        argv.insert(1, "--allow-run-as-root")
    env = {k: v for k, v in os.environ.items() if k not in ("KFP_GPU_DATA_DIR", "KUBECONFIG")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(cmd.env)
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
