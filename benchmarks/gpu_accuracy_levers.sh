#!/usr/bin/env bash
# GPU machine: which lever holds the IMDB classifier's test accuracy after two epochs (the
# model peaks after epoch 1 and overfits in epoch 2: docs/benchmarks.md, GPU). Under Keras'
# JAX backend (the GPU default: XLA, cuDNN LSTM inside), seeds 42, 1, 2, two epochs each:
# the trainer as it was (constant rate); LSTM input dropout 0.2 and 0.4 (keeps cuDNN); Adam
# at 5e-4; Adam decayed to 0 by cosine over the two epochs, alone and with dropout 0.2. The
# 18 trainings run at once (each capped at 5% of the GPU), so their epoch times are no speed
# figures. Cosine is the trainer's default since this screen (kfp_gpu/training/text_model.py
# LR_SCHEDULES), so "base" here is lr_schedule=constant. (The recorded screen, results/gpu/
# h200-2026-11-28/accuracy_levers.txt, ran three epochs, the cosine over the first two.)
# Needs the arrays of `benchmarks/gpu_bench.py prep` in .gpudata/ and keras, namex, optree as
# wheels in .whl/. Results: $OUT/levers.txt, one RESULT line per training.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
D=.gpudata/imdb_maxlen80.npz
run() { XLA_PYTHON_CLIENT_MEM_FRACTION=$1 timeout 280 python3 benchmarks/gpu_variants.py "$2" 2>&1 | grep -E "RESULT|Error" | sed "s/^/$3 /" >> "$OUT/$4"; }
spec() { echo "{\"fn\":\"imdb_accuracy\",\"data\":\"$D\",\"epochs\":2,\"seed\":$1,\"use_cudnn\":\"auto\",\"jit\":true,\"config\":$2}"; }
C='"lr_schedule":"constant"'
for s in 42 1 2; do
  run 0.05 "$(spec $s "{$C}")" base levers.txt &
  run 0.05 "$(spec $s "{\"dropout\":0.2,$C}")" dropout0.2 levers.txt &
  run 0.05 "$(spec $s "{\"dropout\":0.4,$C}")" dropout0.4 levers.txt &
  run 0.05 "$(spec $s "{\"learning_rate\":0.0005,$C}")" lr5e-4 levers.txt &
  run 0.05 "$(spec $s '{}')" cosine levers.txt &
  run 0.05 "$(spec $s '{"dropout":0.2}')" dropout0.2+cosine levers.txt &
done
wait
sort "$OUT/levers.txt"
