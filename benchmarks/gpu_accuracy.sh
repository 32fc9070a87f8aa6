#!/usr/bin/env bash
# GPU machine: the seed spread of the IMDB classifier's test accuracy after each of three
# epochs, under Keras' JAX backend (cuDNN LSTM inside XLA; seeds 42, 1, 2; and the generic
# loop, use_cudnn=False) and the torch backend (cuDNN; seeds 42, 1). The six trainings run at
# once (each JAX process capped at 10% of the GPU), so their epoch times are no speed figures.
# Needs the arrays of `benchmarks/gpu_bench.py prep` in .gpudata/ and keras, namex, optree as
# wheels in .whl/. Results: $OUT/acc.txt, one RESULT line per training (docs/benchmarks.md, GPU).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.1
D=.gpudata/imdb_maxlen80.npz
run() { KERAS_BACKEND=$1 timeout 200 python3 benchmarks/gpu_variants.py "$2" 2>&1 | grep -E "RESULT|Error" | sed "s/^/$1 /" >> "$OUT/acc.txt"; }
spec() { echo "{\"fn\":\"imdb_accuracy\",\"data\":\"$D\",\"epochs\":3,\"seed\":$1,\"use_cudnn\":$2,\"jit\":$3}"; }
for s in 42 1 2; do run jax "$(spec $s '"auto"' true)" & done
run jax "$(spec 42 false true)" &
for s in 42 1; do run torch "$(spec $s true false)" & done
wait
cat "$OUT/acc.txt"
