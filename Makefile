# kfp-gpu: one command to set up and run the main job, one to run the tests.
DATA_DIR ?= ../shared/data
PYTEST_ARGS ?=
# Two pytest-xdist workers: the tests of the one test control plane in one, the Docker
# engine's in the other, the rest wherever a worker is free (conftest.py xdist_group).
# PYTEST_XDIST= runs everything in one process.
PYTEST_XDIST ?= -n 2 --dist loadgroup

.PHONY: setup run test compile check lint images images-local test-containers \
	control-plane cluster-up cluster-down chaos

.venv/.installed: pyproject.toml requirements/tensorflow.txt scripts/setup.sh
	bash scripts/setup.sh
	touch $@

setup: .venv/.installed

# The main job: the IMDB LSTM pipeline on CPU with kfp.local, on the full 50k IMDB
# reviews in $(DATA_DIR) (2 epochs, maxlen 80, batch 32).
run: setup
	.venv/bin/kfp-gpu run imdb-lstm --local --data-dir $(DATA_DIR)

test: setup
	.venv/bin/pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

compile: setup
	.venv/bin/kfp-gpu compile

check: setup
	.venv/bin/kfp-gpu compile --check

lint: setup
	.venv/bin/ruff check kfp_gpu components pipelines tests testcluster benchmarks

# Build and push the runtime images (needs a Docker engine; tags = package version,
# registry from KFP_GPU_REGISTRY). See images/README.md.
images:
	bash scripts/build-images.sh

# The three images built here (CPU flavour: debootstrap Debian base, wheelhouse, classic
# builder) on the engine at DOCKER_HOST, tagged as the compiled YAML names them.
images-local: setup
	bash scripts/build-images.sh --local

# Container tests in one command: a private dockerd (unless DOCKER_HOST is set), the images,
# pytest -m container, the daemon stopped by its pid. See tests/containers/README.md.
test-containers: setup
	bash scripts/test-containers.sh $(PYTEST_ARGS)


# The test control plane (testcluster/README.md): build the pinned Go modules into
# ~/.cache/kfp-gpu/control-plane (TIERS: tier1 = Kubernetes + etcd + kwok + mpi-operator,
# tier2 = JobSet + Trainer, tier3 = Kueue, node = a real node: kubelet, containerd, runc,
# CNI, CoreDNS, dra-example-driver), bring it up (prints the kubeconfig; NODE=1 adds the
# real node) and take it down (every process, mount, namespace and cgroup it made).
TIERS ?= tier1
NODE ?=
control-plane:
	bash testcluster/build.sh $(TIERS) $(if $(NODE),node)

cluster-up: setup control-plane
	.venv/bin/python -m testcluster.controlplane up $(if $(NODE),--node)

cluster-down: setup
	.venv/bin/python -m testcluster.controlplane down

# The chaos scenarios (tests/cluster/test_chaos.py, docs/reliability.md): the API server,
# mpi-operator, Trainer and JobSet stopped or killed mid-run on the plane of
# `make cluster-up NODE=1` (or a plane of their own when none answers); they need the
# horovod image (make images-local); Kueue preemption of a running job and 20 jobs on GPU
# quota for 4 (test_preemption.py, test_load.py: tier 3, kwok nodes); the real node lost,
# etcd stopped, a Secret's value searched in every log and object of a run
# (test_chaos_node.py, test_chaos_etcd.py, test_secret_leaks.py). Not part of `make test`.
chaos: setup
	.venv/bin/pytest -p no:cacheprovider -m chaos tests/cluster/test_chaos.py \
	  tests/cluster/test_preemption.py tests/cluster/test_load.py \
	  tests/cluster/test_chaos_node.py tests/cluster/test_chaos_etcd.py \
	  tests/cluster/test_secret_leaks.py $(PYTEST_ARGS)
