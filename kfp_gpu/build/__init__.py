"""Build artefacts: compiled component/pipeline YAML, runtime image names, and the registry
of components and pipelines."""
