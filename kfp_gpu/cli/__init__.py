"""The ``kfp-gpu`` command line (typer). Library modules never import this package."""

from kfp_gpu.cli.app import app, main

__all__ = ["app", "main"]
