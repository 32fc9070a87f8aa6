"""KFP v2 components of kfp-gpu, one folder each (mapped to kfp_gpu.components)."""
