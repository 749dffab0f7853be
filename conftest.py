"""Root conftest: the suite's machinery is the refarch pytest plugin."""

pytest_plugins = ["refarch.pytest.plugin", "refarch.pytest.workloads"]
