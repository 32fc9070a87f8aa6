#!/usr/bin/env bash
# GPU machine: the IMDB classifier's test accuracy after each of its two epochs, with the
# trainer's defaults (kfp_gpu/training/text_model.py TrainConfig: Adam decayed by cosine),
# under Keras' JAX backend (the GPU default: XLA, cuDNN LSTM inside; seeds 42, 1, 2, 3) and
# the torch backend (cuDNN; seeds 42, 1). The six trainings run at once (each JAX process
# capped at 10% of the GPU), so their epoch times are no speed figures; the two solo runs
# after them time the trainer alone, cosine and constant rate side by side.
# Needs the arrays of `benchmarks/gpu_bench.py prep` in .gpudata/ and keras, namex, optree as
# wheels in .whl/. Results: $OUT/acc.txt and $OUT/solo.txt, one RESULT line per training
# (docs/benchmarks.md, GPU).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1
D=.gpudata/imdb_maxlen80.npz
run() { KERAS_BACKEND=$1 XLA_PYTHON_CLIENT_MEM_FRACTION=$2 timeout 200 python3 benchmarks/gpu_variants.py "$3" 2>&1 | grep -E "RESULT|Error" | sed "s/^/$1 $4/" >> "$OUT/$5"; }
spec() { echo "{\"fn\":\"imdb_accuracy\",\"data\":\"$D\",\"epochs\":2,\"seed\":$1,\"use_cudnn\":\"auto\",\"jit\":$2}"; }
for s in 42 1 2 3; do run jax 0.1 "$(spec $s true)" "" acc.txt & done
for s in 42 1; do run torch 0.1 "$(spec $s false)" "" acc.txt & done
wait
sort "$OUT/acc.txt"
solo() { echo "{\"fn\":\"keras_imdb\",\"data\":\"$D\",\"rows\":0,\"epochs\":2,\"jit\":null,\"spe\":1,\"extra\":$1,\"quick\":true}"; }
for c in '{}' '{"lr_schedule":"constant"}'; do run jax 0.5 "$(solo "$c")" "solo $c " solo.txt; done
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    key, _, r = line.partition('RESULT ')
    d = json.loads(r)
    print(key, 's/epoch', d['epoch_seconds'], 'accuracy', round(d['test_accuracy'], 4), 'cuDNN', d['cudnn_kernel_used'])
" "$OUT/solo.txt"
