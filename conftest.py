"""Root conftest: the suite's machinery is the refarch pytest plugin."""

pytest_plugins = ["refarch.pytest.options", "refarch.pytest.fixtures", "refarch.pytest.nodelogs", "refarch.pytest.reporting",
                  "refarch.pytest.workloads", "refarch.pytest.availability", "refarch.pytest.elastic",
                  "refarch.pytest.tools", "refarch.pytest.surveys"]
