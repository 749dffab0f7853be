"""The fault cases' marker: ``runs_alone`` on a case that judges a figure or
stops and starts nodes (refarch.faults.base.Fault.alone), so that ci/test.sh can
run the others beside work that judges no figure
(``-k "test_fault_is_caught and not runs_alone"``)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "runs_alone: a fault case that judges a figure or times a recovery: it runs "
                                       "only where nothing else loads the machine")
