"""prep_text's tokenisation speed on the real IMDB reviews: reviews/s, one line.

Times what prep_text does between reading the table and writing the artifacts: clean the
HTML breaks, tokenise, fit the vocabulary on the training split, map every review of both
splits to ids and pad them (components/prep_text/tokens.py ``encode``), on the 50,000
reviews of ``imdb/imdb_50k.csv.gz`` with the pipeline's settings (vocabulary 20,000,
maxlen 80). Reports the best of ``--repeats`` runs (the first run pays page faults),
each run's wall time, the CPU time (less disturbed by other processes on a shared
machine) and the load average; ``--with-io`` also times the whole ``prep.run`` (read CSV, write
Datasets). No TensorFlow is imported.

Usage:
  .venv/bin/python benchmarks/prep_text_bench.py --data-dir ../shared/data
  .venv/bin/python benchmarks/prep_text_bench.py --rows 2000 --repeats 1   # smoke run
"""

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from kfp_gpu.components.prep_text import prep, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("KFP_GPU_DATA_DIR", "../shared/data"))
    ap.add_argument("--rows", type=int, default=0, help="reviews per split (0: all 25,000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-words", type=int, default=20000)
    ap.add_argument("--maxlen", type=int, default=80)
    ap.add_argument("--with-io", action="store_true", help="also time the whole prep.run")
    args = ap.parse_args()
    source = str(Path(args.data_dir).resolve() / "imdb" / "imdb_50k.csv.gz")
    train, test = prep.to_splits(prep.read_table(source), text_column="review",
                                 label_column="sentiment", positive_label="positive",
                                 negative_label="negative", split_column="split",
                                 test_fraction=0.5, seed=42)
    train = prep.subsample(train, args.rows, 42)
    test = prep.subsample(test, args.rows, 43)
    texts = np.concatenate([train.texts, test.texts])
    times, cpu = [], []
    for _ in range(max(1, args.repeats)):
        t0, c0 = time.perf_counter(), time.process_time()
        tokens.encode(texts, fit_rows=len(train.texts), num_words=args.num_words,
                      maxlen=args.maxlen)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    best = min(times)
    line = (f"prep_text tokenise+vocabulary+pad: {len(texts) / best:,.0f} reviews/s "
            f"({len(texts):,} reviews, best {best:.2f} s wall of "
            f"{', '.join(f'{t:.2f}' for t in times)}; CPU {min(cpu):.2f} s; "
            f"{os.cpu_count()} cores {platform.processor() or platform.machine()}, "
            f"load average {os.getloadavg()[0]:.1f})")
    if args.with_io:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            prep.run(source=source, train_path=f"{d}/train", test_path=f"{d}/test",
                     vocabulary_path=f"{d}/vocab.txt", max_rows_per_split=args.rows,
                     num_words=args.num_words, maxlen=args.maxlen)
            line += f"; whole prep.run incl. CSV read and writes {time.perf_counter() - t0:.2f} s"
    print(line)


if __name__ == "__main__":
    main()
