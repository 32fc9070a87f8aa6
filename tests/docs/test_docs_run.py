"""Docs that run: every code block of README.md,
docs/*.md, components/*/README.md, images/README.md, manifests/README.md,
testcluster/README.md and tests/*/README.md is executed as written, compared with
what it shows, or -- where it needs what no test run has -- checked against what it names
and skipped with the reason.

Library: Sybil 10 (``sybil==10.1.0``, the ``dev`` extra). It was chosen over pytest-examples
and mktestdocs because it parses Markdown (fenced blocks, blocks in list items, and its
``<!-- invisible-code-block: python -->`` comments for the set-up a snippet assumes) and
leaves each language's evaluation to us, which the shell and console blocks need; it
keeps one namespace per page, as a reader keeps one interpreter; it has no dependencies,
so it installs beside the pinned kfp 2.17 / protobuf 6 / TensorFlow 2.18 set (pytest-examples
brings black and its own ruff pin; mktestdocs runs only Python and bash blocks, without
per-block set-up, and is barely maintained). The evaluators: :mod:`tests.support.doc_blocks`; what a
block needs and the directives above it: :mod:`tests.support.doc_needs`; output and data
comparison: :mod:`tests.support.doc_output`, :mod:`tests.support.doc_sources`; bash: :mod:`tests.support.doc_commands`.

Pages are found by glob, so a new page or block is tested without any work by its author.
Each block is a test item (``test_block[README.md:96]``); the Python blocks above it on
its page run first (on demand when it is selected alone), shell blocks only as items. The
blocks run in a sandbox checkout (symlinks to this one, its own ``build/`` and
``local_outputs/``) beside ``shared/data`` (the real data), with ``$KFP_GPU_DATA_DIR`` unset
so the documented default data folder is what the commands use.

A block's ``# needs:`` words become the item's markers and fixtures: ``docker`` ->
``container`` (the engine at ``$DOCKER_HOST`` and the built images, ``docker_client`` /
``image`` of tests/conftest.py), ``registry`` -> ``container`` plus the test registry with
the images pushed (``$REGISTRY``, ``registry`` / ``pushed`` of tests/conftest.py),
``cluster`` -> ``cluster`` (the session's control plane, ``plane`` of tests/conftest.py:
``$KUBECONFIG``). Blocks that train (``kfp-gpu run --local``,
``make run``, ``mpirun``) are marked ``slow``; ``make test`` runs them (CI too).
"""

from __future__ import annotations

import collections
import os
import re
import sys
from pathlib import Path

import pytest

from tests.support import doc_blocks, doc_commands, doc_needs, doc_output

# The ``docker`` / ``registry`` / ``cluster`` blocks ask for the session's fixtures by name
# (docker_client, image, registry, pushed, plane: tests/conftest.py), the instances the
# container and cluster tests use too.

REPO = Path(__file__).resolve().parents[2]
#: Every page a user or a test writer reads (tests/docs/test_docs_facts.py reads the same).
DOC_GLOBS = ("README.md", "docs/*.md", "components/*/README.md", "images/README.md",
             "manifests/README.md", "testcluster/README.md", "tests/*/README.md")
#: Blocks that train or run pipelines (tens of seconds each on 2 cores).
HEAVY = re.compile(r"(\brun\b.*--local|\bmake run\b|\bmpirun\b|train-resnet|"
                   r"benchmarks/\w+\.py|mpijob run-local|trainjob run-local)")


def documents() -> list[str]:
    """The pages under test, repository-relative, sorted."""
    return sorted({str(p.relative_to(REPO)) for g in DOC_GLOBS for p in REPO.glob(g)})


def _marks(example) -> list:
    marks = []
    lang = doc_blocks.language(example)
    try:
        needs = doc_blocks.needs_of(example)
    except AssertionError:  # an unknown word: the item fails with the reason
        return marks
    marks += [getattr(pytest.mark, m) for m in sorted(needs.markers)]
    if (lang in (*doc_blocks.SHELL, "console") and doc_blocks.kind_of(example).startswith("run")
            and HEAVY.search(str(example.parsed))):
        marks.append(pytest.mark.slow)
    return marks


def _items() -> list:
    items = []
    for doc in documents():
        for i, ex in enumerate(doc_blocks.parse(REPO / doc)):
            items.append(pytest.param(doc, i, id=f"{doc}:{ex.line}", marks=_marks(ex)))
    return items


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory, shared_data) -> tuple[Path, Path]:
    """``(checkout, tmp)``: a checkout of symlinks to this one beside ``shared/data``."""
    root = tmp_path_factory.mktemp("docs")
    checkout = root / "kfp-gpu"
    checkout.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("build", "local_outputs"):
            (checkout / entry.name).symlink_to(entry)
    (root / "shared").mkdir()
    (root / "shared" / "data").symlink_to(shared_data)
    (root / "tmp").mkdir()
    return checkout, root / "tmp"


def capabilities(needs: doc_needs.Needs, request) -> dict[str, str]:
    """What the block's ``# needs:`` words ask for, brought by their fixtures: the
    environment the block runs with."""
    env: dict[str, str] = {}
    if {"docker", "registry"} & set(needs.words):
        request.getfixturevalue("docker_client")
        image = request.getfixturevalue("image")
        for name in ("trainer", "horovod", "launcher"):
            image(name)  # skips (fails under CI) when an image is not built
    if "registry" in needs.words:
        env["REGISTRY"] = request.getfixturevalue("registry")
        request.getfixturevalue("pushed")
    if "cluster" in needs.words:
        the_plane = request.getfixturevalue("plane")
        env["KUBECONFIG"] = str(the_plane.kubeconfig)
        if "k8s" in the_plane.bins:  # the plane's own kubectl
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent),
                                           str(the_plane.bins["k8s"]), os.environ["PATH"]])
    return env


#: Page -> {"examples": its Sybil examples, "done": how many were visited, "failed": the
#: line of a Python block that failed (the blocks below it lack its names)}.
_PAGES: dict[str, dict] = {}


def _page(doc: str, sandbox: tuple[Path, Path]) -> dict:
    if doc not in _PAGES:
        document = doc_blocks.parse(REPO / doc)
        document.namespace.update(_sandbox=sandbox[0], _tmp=sandbox[1], __name__="__doc__")
        _PAGES[doc] = {"examples": list(document), "done": 0, "failed": None}
    return _PAGES[doc]


def _runs_unasked(example) -> bool:
    """A Python block the blocks below it may rely on: one that needs nothing."""
    if example.region.evaluator is not doc_blocks.evaluate_python:
        return False
    try:
        return not doc_blocks.needs_of(example).words
    except AssertionError:
        return False


@pytest.mark.parametrize("doc,index", _items())
def test_block(doc, index, sandbox, request):
    """The block runs (or is checked, then skipped with its ``# needs:`` reason) and shows
    what it does."""
    page = _page(doc, sandbox)
    for example in page["examples"][page["done"]:index]:  # the Python above, once
        page["done"] += 1
        if _runs_unasked(example):
            try:
                example.evaluate()
            except Exception:  # noqa: BLE001 - reported by the blocks below it
                page["failed"] = example.line
    example = page["examples"][index]
    python = example.region.evaluator is doc_blocks.evaluate_python
    if python and page["failed"] is not None:
        pytest.fail(f"{doc}: the Python block at line {page['failed']} above this one failed")
    page["done"] = max(page["done"], index + 1)
    needs = doc_blocks.needs_of(example)  # an unknown word fails here
    example.namespace["_env"] = capabilities(needs, request) if not needs.skip else {}
    try:
        example.evaluate()
    except pytest.skip.Exception:
        raise
    except BaseException:
        if python:
            page["failed"] = example.line
        raise
    finally:
        example.namespace["_env"] = {}


def test_pages_are_found_by_glob():
    """Every README.md and docs page is under test; each has its blocks found."""
    docs = documents()
    assert {"README.md", "docs/distributed.md", "images/README.md",
            "components/evaluate_classifier/README.md"} <= set(docs)
    assert len([i for i in _items() if i.values[0] == "README.md"]) >= 8


def census() -> dict[str, collections.Counter]:
    """How many blocks the doc tests run, compare, only check or only show: kind (see
    :func:`tests.support.doc_blocks.kind_of`) -> counter by ``# needs:`` word (``-``: none)."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for doc in documents():
        for ex in doc_blocks.parse(REPO / doc):
            try:
                words = doc_blocks.needs_of(ex).words or ("-",)
                kind = doc_blocks.kind_of(ex)
            except AssertionError:  # an unknown word (its own item fails)
                words, kind = ("?",), "failing"
            out[kind][" ".join(words)] += 1
    return out


def test_blocks_that_need_nothing_this_machine_lacks_are_run():
    """Only blocks whose ``# needs:`` words name what no test run has are merely checked;
    every other shell, console and Python block runs."""
    for doc in documents():
        for ex in doc_blocks.parse(REPO / doc):
            if doc_blocks.language(ex) in (*doc_blocks.SHELL, "console", "python"):
                try:
                    kind = doc_blocks.kind_of(ex)
                except AssertionError:
                    continue  # an unknown '# needs:' word: its own item fails
                assert kind.startswith("run") or doc_blocks.needs_of(ex).skip or \
                    doc_blocks.directives_of(ex).synopsis, f"{doc}:{ex.line} is not run"


# -- the machinery itself: a wrong page fails ------------------------------------------


def _fake_page(tmp_path: Path, text: str):
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    document = doc_blocks.parse(page)
    document.namespace.update(_sandbox=tmp_path, _tmp=tmp_path, __name__="__doc__")
    return list(document)


def _passes(tmp_path: Path, text: str) -> None:
    """The one block of page ``text`` evaluates without an error."""
    (ex,) = _fake_page(tmp_path, text)
    ex.evaluate()


def _fails(tmp_path: Path, text: str, match: str) -> None:
    """The one block of page ``text`` fails with an AssertionError matching ``match``."""
    (ex,) = _fake_page(tmp_path, text)
    with pytest.raises(AssertionError, match=match):
        ex.evaluate()


def test_a_console_block_with_a_wrong_number_fails(tmp_path):
    def page(shown: str) -> str:
        return f"```console\n$ echo 'accuracy: 0.84 (25000 examples)'\n{shown}\n```\n"

    _passes(tmp_path, page("accuracy: <F> (25000 examples)"))
    _passes(tmp_path, page("accuracy: 0.84 (25000 examples)"))
    for wrong in ("accuracy: <F> (300 examples)",  # a wrong number
                  "accuracy: 0.85 (25000 examples)",  # a number is literal unless it says <F>
                  "accuracy: <N> (25000 examples)"):  # <N> is an integer
        (ex,) = _fake_page(tmp_path, page(wrong))
        with pytest.raises(AssertionError, match="did not print"):
            ex.evaluate()


def test_a_console_block_fails_on_lines_it_does_not_show_and_on_a_wrong_exit(tmp_path):
    _fails(tmp_path, "```console\n$ printf 'a\\nb\\n'\na\n```\n", "not show")
    _passes(tmp_path, "```console\n$ printf 'a\\nb\\n'\na\n...\n```\n")
    _fails(tmp_path, "```console\n$ false  # exit 2\n```\n", "exited 1, the page says 2")
    # one session: a variable set by one command is there for the next
    _passes(tmp_path, "```console\n$ X=7\n$ echo $X\n7\n```\n")


def test_a_shell_block_runs_as_written_with_bash(tmp_path):
    _passes(tmp_path, "```bash\ntest \"$(echo a | tr a b)\" = b && touch made\n```\n")
    assert (tmp_path / "made").exists()
    (ex,) = _fake_page(tmp_path, "```bash\nfalse | true\ntouch not-made\n```\n")
    with pytest.raises(AssertionError, match="exited 1"):  # -o pipefail, -e
        ex.evaluate()
    assert not (tmp_path / "not-made").exists()
    _passes(tmp_path, "```bash\nkfp-gpu compile --no-such-option  # exit 2\n```\n")
    _fails(tmp_path, "```bash\nkfp-gpu --version  # exit 2\n```\n", "exited 1")


def test_needs_words_are_a_fixed_vocabulary(tmp_path):
    _fails(tmp_path, "```bash\n# needs: a GPU\nnvidia-smi\n```\n", "unknown")
    (ex,) = _fake_page(tmp_path, "```bash\n# needs: gpu -- the benchmark\n"
                                 "python benchmarks/gpu_share_bench.py --k 4\n```\n")
    with pytest.raises(pytest.skip.Exception, match="needs gpu"):
        ex.evaluate()
    # a line that could run is not held back by a neighbour that cannot
    _fails(tmp_path, "```bash\n# needs: kfp\nkfp-gpu compile -o build/x\n"
                                 "kfp-gpu submit imdb-lstm --host https://k\n```\n", "block of its own")
    # a command that needs a capability its block does not name
    _fails(tmp_path, "```bash\nkubectl apply -k manifests/rbac\n```\n", r"needs \['cluster'\]")
    # a synopsis is checked, not run
    _passes(tmp_path, "<!-- docs-test: synopsis -->\n```bash\n"
                                 "kfp-gpu mpijob run-local FILE [--keep]\n```\n")
    _fails(tmp_path, "<!-- docs-test: synopsis -->\n```bash\n"
                                 "kfp-gpu mpijob run-local FILE [--kept]\n```\n", "no option --kept")
    # a skipped block's commands are still checked
    _fails(tmp_path, "```bash\n# needs: kfp\nkfp-gpu submit imdb-lstm --hots x\n```\n", "no option --hots")


def test_yaml_blocks_are_compared_with_their_source_or_say_they_illustrate(tmp_path):
    role = ("<!-- docs-test: source=kustomize:manifests/rbac#Role -->\n```yaml\n"
            "kind: Role\nmetadata: {name: kfp-gpu-launcher, namespace: kubeflow}\n"
            "rules:\n- {apiGroups: [kubeflow.org], resources: [mpijobs], verbs: [create, get, "
            "list, watch, delete, patch]}\n- ...\n```\n")
    _passes(tmp_path, role)
    _fails(tmp_path, role.replace("delete, patch", "patch"), "verbs")
    _fails(tmp_path, role.replace("- ...\n", ""), "items shown")
    _fails(tmp_path, "```yaml\na: 1\n```\n", "illustration")
    _passes(tmp_path, "<!-- docs-test: illustration -->\n\n```yaml\na: 1\n```\n")
    _fails(tmp_path, "<!-- docs-test: source=python:{'a': 2} -->\n```yaml\na: 1\n```\n", "shown 1, generated 2")


def test_compiled_and_shipped_sources(tmp_path):
    """``compile:`` (what ``kfp-gpu compile -o`` writes) and ``file:`` (a shipped file)."""
    page = ("<!-- docs-test: source=compile:components/train_resnet_horovod/component.yaml"
            "#root/inputDefinitions/parameters/backend -->\n```yaml\n"
            "{defaultValue: mpijob, parameterType: STRING}\n```\n")
    _passes(tmp_path, page)
    _fails(tmp_path, page.replace("mpijob,", "trainjob,"), "shown 'trainjob', generated 'mpijob'")
    page = ("<!-- docs-test: source=file:manifests/trainer/horovod-runtime.yaml -->\n```yaml\n"
            "{kind: ClusterTrainingRuntime, metadata: {name: kfp-gpu-horovod}}\n```\n")
    _passes(tmp_path, page)
    _fails(tmp_path, page.replace("kfp-gpu-horovod", "kfp-gpu-mpi"), "none generated with that kind and name")


def test_a_layout_names_what_exists_and_every_package():
    assert doc_blocks.layout_problems("kfp_gpu/   core\n  nothere/  x\n") == [
        "kfp_gpu/nothere: no such file or folder"] + [
        f"kfp_gpu/{p.name}/: a package the layout leaves out"
        for p in sorted((REPO / "kfp_gpu").iterdir()) if (p / "__init__.py").is_file()]


def test_output_placeholders_are_only_the_marked_ones():
    assert doc_output.matches(["finished in <T>", "n=<N> f=<F>"], "finished in 85.0 s\nn=3 f=0.5")
    assert not doc_output.matches(["n=<N>"], "n=0.5")
    assert not doc_output.matches(["finished in 85.0 s"], "finished in 61.2 s")
    assert doc_output.matches(["a ... z"], "a b c z")
    assert doc_output.matches(["x", "...", "y"], "x\ny")


#: Inline commands of ours: kfp-gpu, python -m kfp_gpu, the benchmarks and scripts.
INLINE = re.compile(r"`((?:\.venv/bin/)?kfp-gpu [^`]+|python -m kfp_gpu[^`]*|"
                    r"(?:\.venv/bin/)?python3? benchmarks/[^`]+|(?:bash )?scripts/[\w-]+\.sh[^`]*|"
                    r"(?:bash )?testcluster/build\.sh[^`]*)`")


@pytest.mark.parametrize("doc", documents())
def test_inline_commands_name_real_options(doc):
    """`kfp-gpu ...`, `python -m kfp_gpu...`, `python benchmarks/X.py ...` and
    `scripts/X.sh ...` in the prose: commands, scripts and options exist."""
    text = (REPO / doc).read_text(encoding="utf-8")
    problems = []
    for m in INLINE.finditer(text):
        for cmd in doc_commands.split_commands(m.group(1)):
            problems += [f"`{m.group(1)}`: {p}" for p in doc_commands.check_command(cmd)]
    assert not problems, "\n".join(problems)


# -- what the prose says about the repository itself ------------------------------------


def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_the_checked_in_pipeline_yaml_is_what_the_readme_lists():
    m = re.search(r"checked in under `pipelines/`\s*\(([^)]*)\)", _readme())
    assert m, "README.md no longer lists the checked-in pipeline YAML"
    listed = set(re.findall(r"`([\w.]+\.yaml)`", m.group(1)))
    assert listed == {p.name for p in (REPO / "pipelines").glob("*.yaml")}


def test_the_markers_the_readme_names_are_pyproject_s():
    m = re.search(r"Markers: (.*?); e\.g\.", _readme(), re.DOTALL)
    assert m, "README.md no longer lists the test markers"
    named = set(re.findall(r"`(\w+)` \(", m.group(1)))
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    declared = set(re.findall(r'^\s*"(\w+):', text[text.index("markers = ["):], re.MULTILINE))
    assert named == declared


def test_the_pins_the_readme_names_are_the_installed_ones():
    """"Pins: kfp X, ..." against the files that pin them."""
    line = re.search(r"- Pins: (.*?)\n- ", _readme(), re.DOTALL).group(1)
    named = dict(re.findall(r"([a-zA-Z][\w-]*) (\d+\.\d+\.\d+)", line.replace("\n", " ")))
    pins = {"kfp": "pyproject.toml", "kfp-kubernetes": "pyproject.toml",
            "keras": "pyproject.toml", "tensorflow-cpu": "requirements/tensorflow.txt",
            "Horovod": "scripts/setup.sh", "OpenMPI": "scripts/setup.sh"}
    assert set(pins) <= set(named), named
    for name, where in pins.items():
        text = (REPO / where).read_text(encoding="utf-8")
        assert f"{name.lower()}=={named[name]}" in text, f"{name} {named[name]} not in {where}"


def test_every_component_folder_has_a_readme_with_its_inputs_outputs_and_gpu():
    """"Each component folder has a README with its inputs, outputs and GPU request"."""
    import yaml

    assert "Each component folder has a README with its inputs, outputs and GPU request" in \
        _readme()
    for spec in sorted((REPO / "components").glob("*/component.yaml")):
        readme = spec.parent / "README.md"
        assert readme.is_file(), f"{spec.parent.name}: no README.md"
        text = readme.read_text(encoding="utf-8")
        root = yaml.safe_load(spec.read_text(encoding="utf-8"))["root"]
        names = [n for part in ("inputDefinitions", "outputDefinitions")
                 for kind in ("parameters", "artifacts")
                 for n in (root.get(part) or {}).get(kind) or {}]
        missing = [n for n in names if n not in text]
        assert not missing, f"{readme.relative_to(REPO)} does not name {missing}"
        assert "GPU" in text, f"{readme.relative_to(REPO)} says nothing of its GPU request"


def test_manifests_cluster_is_steps_2_3_and_5():
    """docs/cluster.md: "Steps 2, 3 and 5 together: kubectl apply -k manifests/cluster"."""
    import yaml

    text = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    assert "Steps 2, 3 and 5 together: `kubectl apply -k manifests/cluster`" in text
    k = yaml.safe_load((REPO / "manifests" / "cluster" / "kustomization.yaml").read_text())
    assert sorted(k.get("bases", []) + k.get("resources", [])) == [
        "../device-plugin", "../rbac", "../rdma"]


def test_kfp_gpu_version_prints_the_version():
    """README: "`kfp-gpu --version` prints the version"."""
    import subprocess

    from kfp_gpu import __version__

    assert "`kfp-gpu --version` prints the version" in _readme()
    out = subprocess.run([str(Path(sys.executable).parent / "kfp-gpu"), "--version"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert __version__ in out.split()


def test_the_trainjob_runtime_default_is_the_one_local_mpijob_md_names():
    """docs/local-mpijob.md: "--runtime defaults to this checkout's
    manifests/trainer/horovod-runtime.yaml (the ClusterTrainingRuntime kfp-gpu-horovod)"."""
    import yaml

    text = (REPO / "docs" / "local-mpijob.md").read_text(encoding="utf-8")
    assert ("`--runtime` defaults to this checkout's `manifests/trainer/horovod-runtime.yaml` "
            "(the\nClusterTrainingRuntime `kfp-gpu-horovod`)") in text
    doc = yaml.safe_load((REPO / "manifests/trainer/horovod-runtime.yaml").read_text())
    assert (doc["kind"], doc["metadata"]["name"]) == ("ClusterTrainingRuntime", "kfp-gpu-horovod")
    from kfp_gpu.cli import run_local

    assert run_local.DEFAULT_RUNTIME_FILE == REPO / "manifests/trainer/horovod-runtime.yaml"
