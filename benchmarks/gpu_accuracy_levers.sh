#!/usr/bin/env bash
# GPU machine: which lever holds the IMDB classifier's test accuracy after two epochs (the
# model peaks after epoch 1 and overfits in epoch 2: docs/benchmarks.md, GPU). Under Keras'
# JAX backend (the GPU default: XLA, cuDNN LSTM inside), seeds 42, 1, 2, three epochs each:
# the trainer as it is; LSTM input dropout 0.2 and 0.4 (keeps cuDNN); Adam at 5e-4; Adam
# decayed to 0 by cosine over two epochs, alone and with dropout 0.2. The 18 trainings run at
# once (each capped at 5% of the GPU), so their epoch times are no speed figures; the solo
# runs after them time the dropout settings against the trainer as it is.
# Needs the arrays of `benchmarks/gpu_bench.py prep` in .gpudata/ and keras, namex, optree as
# wheels in .whl/. Results: $OUT/levers.txt, one RESULT line per training.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
D=.gpudata/imdb_maxlen80.npz
run() { XLA_PYTHON_CLIENT_MEM_FRACTION=$1 timeout 280 python3 benchmarks/gpu_variants.py "$2" 2>&1 | grep -E "RESULT|Error" | sed "s/^/$3 /" >> "$OUT/$4"; }
spec() { echo "{\"fn\":\"imdb_accuracy\",\"data\":\"$D\",\"epochs\":3,\"seed\":$1,\"use_cudnn\":\"auto\",\"jit\":true,\"config\":$2,\"schedule\":\"$3\"}"; }
for s in 42 1 2; do
  run 0.05 "$(spec $s '{}' '')" base levers.txt &
  run 0.05 "$(spec $s '{"dropout":0.2}' '')" dropout0.2 levers.txt &
  run 0.05 "$(spec $s '{"dropout":0.4}' '')" dropout0.4 levers.txt &
  run 0.05 "$(spec $s '{"learning_rate":0.0005}' '')" lr5e-4 levers.txt &
  run 0.05 "$(spec $s '{}' cosine)" cosine levers.txt &
  run 0.05 "$(spec $s '{"dropout":0.2}' cosine)" dropout0.2+cosine levers.txt &
done
wait
sort "$OUT/levers.txt"
solo() { echo "{\"fn\":\"keras_imdb\",\"data\":\"$D\",\"rows\":0,\"epochs\":2,\"jit\":null,\"spe\":1,\"extra\":$1,\"quick\":true}"; }
for c in '{}' '{"dropout":0.2}' '{"dropout":0.4}'; do run 0.5 "$(solo "$c")" "solo $c" solo.txt; done
cut -c1-400 "$OUT/solo.txt"
