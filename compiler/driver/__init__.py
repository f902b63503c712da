"""The tools on top: the pass pipeline, the Python API, the CLIs, the runner and tuner."""
