"""``python -m kfp_gpu.cli``."""

import sys

from kfp_gpu.cli.app import main

sys.exit(main())
