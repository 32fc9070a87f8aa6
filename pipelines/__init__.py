"""Pipelines of kfp-gpu (mapped to kfp_gpu.pipelines): definitions and compiled YAML."""
