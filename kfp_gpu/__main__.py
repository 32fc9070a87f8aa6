"""``python -m kfp_gpu``: the ``kfp-gpu`` command line (same app, same exit statuses)."""

import sys

from kfp_gpu.cli.app import main

sys.exit(main())
