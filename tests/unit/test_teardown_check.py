"""The teardown is a check of its own (refarch::teardown): a failed
``terraform destroy`` fails the session even when every test passed."""

import xml.etree.ElementTree as ET

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from refarch.pytest.reporting import report_teardown_check

@pytest.fixture(scope="session")
def cluster(request):
    yield "c"
    report_teardown_check(request.config, "hvd-unit-aaaaaa", FAILURE)
"""


def _run(pytester, failure: str):
    pytester.makeconftest(CONFTEST.replace("FAILURE", repr(failure)))
    pytester.makepyfile("def test_check(cluster):\n    assert cluster == 'c'\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=junit.xml")
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    return result, cases


def test_a_clean_teardown_is_a_passed_check(pytester):
    result, cases = _run(pytester, "")
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    assert cases["teardown"].find("failure") is None


def test_a_failed_destroy_fails_the_session_naming_terraforms_error(pytester):
    error = "terraform destroy failed: podman network rm hvd-unit-aaaaaa-net: network is being used"
    result, cases = _run(pytester, error)
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1)
    failure = cases["teardown"].find("failure")
    assert failure is not None and error in failure.get("message"), ET.tostring(cases["teardown"])
    assert "FAILED refarch::teardown - teardown of run hvd-unit-aaaaaa failed" in result.stdout.str()
