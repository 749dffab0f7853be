"""The fault cases' marker: ``runs_alone`` on a case that judges a figure
another load on the machine changes either way (refarch.faults.Fault.alone:
images/sec, efficiency, busbw, a scan), so that ci/test.sh can run the
others beside other work (its faults:checks part)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "runs_alone: a fault case that judges images/sec, efficiency, busbw or a "
                                       "scan: it runs only where nothing else loads the machine")
