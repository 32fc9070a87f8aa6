"""fractional-eval vs one evaluate_classifier task, under kfp.local on the real IMDB test set.

Trains a small Embedding(32) -> LSTM(32) model for one epoch on the 25,000 training
reviews, then evaluates the 25,000 test reviews twice: as the ``fractional-eval``
pipeline (K shards in a dsl.ParallelFor, combined) and as a single ``evaluate_classifier``
task. Prints the combined and the reference metrics (they must be equal) and the wall
times. On a CPU the shards only add process start-ups; the gain needs GPU fractions.

Usage:
  .venv/bin/python benchmarks/fractional_eval_bench.py --data-dir ../shared/data --shards 4
"""

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

from kfp import dsl, local
from kfp.dsl import Dataset, Metrics, Model

from kfp_gpu.components.evaluate_classifier.component import evaluate_classifier
from kfp_gpu.components.prep_text import prep
from kfp_gpu.components.train_text_classifier import train as tr
from kfp_gpu.pipelines import fractional_eval


@dsl.pipeline(name="whole-set-eval")
def whole_set(model_uri: str, test_data_uri: str) -> Metrics:
    model = dsl.importer(artifact_uri=model_uri, artifact_class=Model)
    test = dsl.importer(artifact_uri=test_data_uri, artifact_class=Dataset)
    return evaluate_classifier(model=model.output, test_data=test.output,
                               accuracy_threshold=0.0).outputs["metrics"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("KFP_GPU_DATA_DIR", "../shared/data"))
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rows", type=int, default=0, help="reviews per split (0: all 25,000)")
    args = ap.parse_args()
    source = str(Path(args.data_dir).resolve() / "imdb" / "imdb_50k.csv.gz")
    with tempfile.TemporaryDirectory() as d:
        print("preparing the data and training the small model (1 epoch) ...", flush=True)
        prep.run(source=source, train_path=f"{d}/train", test_path=f"{d}/test",
                 vocabulary_path=f"{d}/vocab.txt", max_rows_per_split=args.rows)
        tr.train(tr.TrainConfig(epochs=1, batch_size=64, embedding_dim=32, lstm_units=32,
                                seed=1),
                 train_path=f"{d}/train", model_dir=f"{d}/model", checkpoint_dir=f"{d}/ckpt",
                 tensorboard_dir=f"{d}/tb")
        local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=f"{d}/root",
                   raise_on_error=True)
        print(f"evaluating: fractional-eval ({args.shards} shards), then one task ...",
              flush=True)
        t0 = time.perf_counter()
        sharded = fractional_eval.build(shards=args.shards)(
            model_uri=f"{d}/model", test_data_uri=f"{d}/test", accuracy_threshold=0.0)
        sharded_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref = whole_set(model_uri=f"{d}/model", test_data_uri=f"{d}/test")
        whole_s = time.perf_counter() - t0
        combined = dict(sharded.outputs["metrics"].metadata)
        reference = dict(ref.output.metadata)
    print(json.dumps({"shards": args.shards, "fractional_eval_seconds": round(sharded_s, 1),
                      "single_task_seconds": round(whole_s, 1), "combined": combined,
                      "reference": reference}, indent=2))
    # per-row scores may differ in the last float32 bits between batch shapes
    same = all(math.isclose(combined.get(k, math.nan), v, rel_tol=1e-6, abs_tol=1e-7)
               for k, v in reference.items())
    print(f"fractional_eval: {args.shards} shards {sharded_s:.1f} s vs one task {whole_s:.1f} s "
          f"({int(reference.get('rows', 0))} reviews), metrics equal (rel. 1e-6): {same}")


if __name__ == "__main__":
    main()
