"""Helpers shared by the tests (no tests here): doc-block runners, doubles of servers
that are not Kubernetes or KFP (S3, GCS), recorded-driver emulation, waiting and upstream
CRD schemas. The HTTP doubles of the Kubernetes and KFP APIs are in tests/doubles/."""
