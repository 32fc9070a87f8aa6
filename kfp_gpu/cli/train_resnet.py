"""``python -m kfp_gpu.cli.train_resnet``: ``kfp-gpu train-resnet`` without the rest of the
CLI, the program every rank runs (:mod:`kfp_gpu.cli.resnet` holds the command). Nothing
imports this module, so ``python -m`` runs it without runpy's "found in sys.modules"
warning."""

from kfp_gpu.cli.resnet import main

if __name__ == "__main__":  # pragma: no cover
    main()
