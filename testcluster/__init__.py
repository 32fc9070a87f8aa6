"""The test cluster: how the control plane the cluster tests run on is made (README.md here)."""
