"""What a docs block needs, in a fixed vocabulary, and the ``<!-- docs-test: ... -->``
directives written above a block (used by tests/docs/test_docs_run.py).

A block that cannot run on a plain test machine says so on a line of its own::

    # needs: WORD [WORD ...] [-- free text for the reader]

with the words of :data:`VOCABULARY`. ``docker``, ``registry`` and ``cluster`` name what CI
has: such a block RUNS, as a test item with the ``container`` or ``cluster`` marker and the
fixtures that bring the engine, the test registry or the control plane. ``gpu``, ``kfp``,
``release``, ``internet`` and ``ci`` name what no CI test run has (or must not do from inside
itself): the block's commands are checked (options, modules, paths) and the item is then
skipped with the word's reason. An unknown word fails.

Each command a block holds needs some capabilities (:func:`requires`): a block may hold it
only when its words provide them (:data:`PROVIDES`), and a block that is skipped may not
hold a command that needs nothing (that line could run here: it goes into a block of its own).

Directives, on the line(s) right above a fenced block (blank lines between allowed)::

    <!-- docs-test: illustration -->              a YAML/JSON block that only illustrates
    <!-- docs-test: source=KIND:WHAT[#SELECT] --> a YAML/JSON block compared with what the
                                                   code generates (tests/support/doc_sources.py)
    <!-- docs-test: synopsis -->                   a bash block of command syntax
                                                   (``[--opt]``, ``FILE``): checked, not run
    <!-- docs-test: env KEY=VALUE ... -->          environment for a shell/console block
    <!-- docs-test: layout -->                     a ``text`` folder tree: every entry exists
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import doc_commands as dc

NEEDS_LINE = re.compile(r"^\s*#\s*needs:\s*(.*)$", re.MULTILINE)
DIRECTIVE = re.compile(r"^[ \t]*<!--\s*docs-test:\s*(.*?)\s*-->[ \t]*$")


@dataclass(frozen=True)
class Word:
    """One word of the ``# needs:`` vocabulary."""

    marker: str | None  #: the pytest marker an item that runs gets (None: skipped)
    reason: str          #: why (shown as the skip reason, or in the item's failure)


VOCABULARY: dict[str, Word] = {
    "docker": Word("container", "a Docker engine at $DOCKER_HOST with the three images built "
                   "here (make images-local)"),
    "registry": Word("container", "a Docker engine and the test registry: $REGISTRY names a "
                     "loopback registry that holds the three images"),
    "cluster": Word("cluster", "the test control plane (testcluster/): $KUBECONFIG is its "
                    "admin kubeconfig"),
    "gpu": Word(None, "a GPU (none on the test machines), or the GPU flavour of the images "
                "(CUDA bases pulled from Docker Hub, docker buildx)"),
    "kfp": Word(None, "a real cluster running Kubeflow (Pipelines, the MPI Operator or Trainer "
                "on real nodes): the opt-in e2e tests"),
    "release": Word(None, "a published release of kfp-gpu (images on ghcr.io, release "
                    "assets; helm, cosign, skopeo) on a real cluster"),
    "internet": Word(None, "downloads (the package index, GPU wheels): the doc tests do not "
                     "download"),
    "ci": Word(None, "what .ci/run itself does around the test run (the whole suite, the "
               "control plane's Go build and its up/down, the image build): not again from "
               "inside the suite"),
}

#: The capabilities each word provides to the commands of its block.
PROVIDES: dict[str, frozenset[str]] = {
    "docker": frozenset({"docker"}),
    "registry": frozenset({"docker", "registry"}),
    "cluster": frozenset({"cluster"}),
    "gpu": frozenset({"gpu", "docker", "internet", "registry"}),
    "kfp": frozenset({"kfp", "cluster"}),
    "release": frozenset({"release", "internet", "cluster", "docker", "registry", "kfp"}),
    "internet": frozenset({"internet"}),
    "ci": frozenset({"ci", "docker", "internet", "cluster"}),
}


@dataclass
class Needs:
    """A block's ``# needs:`` line: its words and free text (none: runs anywhere)."""

    words: tuple[str, ...] = ()
    text: str = ""

    @property
    def markers(self) -> set[str]:
        return {VOCABULARY[w].marker for w in self.words if VOCABULARY[w].marker}

    @property
    def skip(self) -> str | None:
        """The skip reason when any word names what no test run has, else None."""
        skipped = [w for w in self.words if VOCABULARY[w].marker is None]
        if not skipped:
            return None
        return "needs " + "; ".join(f"{w}: {VOCABULARY[w].reason}" for w in skipped) + (
            f" ({self.text})" if self.text else "")

    @property
    def provides(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for w in self.words:
            out |= PROVIDES[w]
        return out


def parse_needs(source: str) -> Needs:
    """The block's ``# needs:`` line (at most one).

    Raises:
        AssertionError: two lines, no word, or a word outside :data:`VOCABULARY`.
    """
    found = NEEDS_LINE.findall(source)
    if not found:
        return Needs()
    assert len(found) == 1, f"one '# needs:' line per block, not {len(found)}"
    words_part, _, text = found[0].partition("--")
    words = tuple(words_part.split())
    assert words, "'# needs:' names no capability: use " + ", ".join(VOCABULARY)
    unknown = [w for w in words if w not in VOCABULARY]
    assert not unknown, (f"'# needs: {found[0].strip()}': unknown {unknown}; the words are "
                         f"{', '.join(VOCABULARY)}, optionally followed by ' -- reason'")
    return Needs(words, text.strip())


@dataclass
class Directives:
    """The ``<!-- docs-test: ... -->`` lines above one block."""

    illustration: bool = False
    synopsis: bool = False
    layout: bool = False
    source: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def directives(text: str, start: int) -> Directives:
    """The directives on the lines right above offset ``start`` (a block's first line) of a
    page's ``text``: consecutive directive lines, blank lines allowed between.

    Raises:
        AssertionError: a directive this module does not know.
    """
    out = Directives()
    lines = text[:start].splitlines()
    if lines and not text[:start].endswith("\n"):
        lines.pop()  # the start of the fence's own line (an indented block)
    for line in reversed(lines):
        if not line.strip():
            continue
        m = DIRECTIVE.match(line)
        if not m:
            break
        body = m.group(1)
        if body == "illustration":
            out.illustration = True
        elif body == "synopsis":
            out.synopsis = True
        elif body == "layout":
            out.layout = True
        elif body.startswith("source="):
            out.source = body[len("source="):]
        elif body.startswith("env "):
            for pair in shlex.split(body[4:]):
                key, sep, value = pair.partition("=")
                assert sep and re.fullmatch(r"[A-Za-z_]\w*", key), f"env {pair!r}: KEY=VALUE"
                out.env[key] = value
        else:
            raise AssertionError(f"unknown directive <!-- docs-test: {body} -->: illustration, "
                                 "source=..., synopsis, env KEY=VALUE, layout")
    return out


# -- what each command needs -------------------------------------------------------------

#: make targets and what they need (others need nothing).
MAKE_TARGETS = {"test": {"ci"}, "test-containers": {"ci"}, "control-plane": {"ci"},
                "cluster-up": {"ci"}, "cluster-down": {"ci"}, "images-local": {"ci"},
                "images": {"docker", "internet", "registry"}}


def requires(cmd: dc.Command) -> set[str]:
    """The capabilities ``cmd`` needs to run as written (empty: it runs anywhere)."""
    argv = cmd.argv
    kind, prog = dc.program(argv)
    head = Path(argv[0]).name if argv else ""
    if kind == "kfp-gpu":
        words = prog[1:]
        sub = next((w for w in words if not w.startswith("-")), "")
        if cmd.expect:  # a refusal the doc shows (no kubeconfig, an unknown option ...)
            return set()
        if sub == "submit":
            return {"kfp"}
        if sub == "doctor":
            return {"cluster"} | ({"kfp"} if any(w.startswith("--kfp-host") for w in words)
                                  else set())
        if sub in ("mpijob", "trainjob") and "run-local" in words:
            return {"docker"}
        if "--pin-digests" in words:
            return {"registry"}
        if "--runner" in words and words[words.index("--runner") + 1:][:1] == ["docker"]:
            return {"docker"}
        if sub == "train-resnet" and "benchmark" in words and "small" not in words:
            return {"gpu"}  # ResNet-50 on 224x224 images, the benchmark's default model
        return set()
    if kind == "make":
        out: set[str] = set()
        for target in (w for w in argv[1:] if "=" not in w and not w.startswith("-")):
            out |= MAKE_TARGETS.get(target, set())
        return out
    if kind == "pytest":
        return {"kfp"} if "e2e" in argv else {"ci"}
    if kind == "script":
        name = Path(prog[0]).name
        if name == "build-images.sh":
            if "--dry-run" in prog:
                return set()
            return {"docker", "ci"} if "--local" in prog else {"docker", "internet", "registry"}
        if name == "build-wheelhouse.sh":
            return {"internet"}
        if name in ("dockerd.sh", "build-base-image.sh", "rebuild_images.sh"):
            return {"docker", "ci"}
        if name == "build.sh":  # testcluster/build.sh: Go and the module proxy, tens of min
            return {"ci"}
        if name.startswith("gpu_") and name.endswith((".py", ".sh")):
            # benchmarks/gpu_*: run on a GPU machine (gpu_bench.py's host step, prep, only
            # writes the arrays its GPU runs read)
            return {"gpu"}
        return set()
    if head == "eval" and len(argv) == 2 and argv[1].startswith("$(") and argv[1].endswith(")"):
        # eval "$(scripts/dockerd.sh start)": what the substituted command needs
        return requires(dc.Command(shlex.split(argv[1][2:-1]), text=argv[1]))
    if head == "kubectl":
        return set() if argv[1:2] == ["kustomize"] else {"cluster"}
    if head == "docker":
        return {"docker"}
    if head in ("helm",):
        return {"cluster", "internet"}
    if head in ("cosign", "skopeo", "curl"):
        return {"release"}
    return set()


def check_block(needs: Needs, commands: list[dc.Command]) -> list[str]:
    """Problems with a shell block's ``# needs:`` line against its commands."""
    problems = []
    for cmd in commands:
        req = requires(cmd)
        missing = req - needs.provides
        if missing:
            problems.append(f"`{cmd.text}` needs {sorted(missing)}: name it on the block's "
                            "'# needs:' line, or move the line into a block that does")
        elif needs.skip and not req:
            problems.append(f"`{cmd.text}` can run in the doc tests, but its block is skipped "
                            f"({needs.skip[:60]}...): move it into a block of its own")
    return problems
