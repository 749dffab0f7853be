"""Policy scan of the Terraform descriptors with checkov (its OpenStack
checks plus ours in ci/checkov): the descriptors pass, a deliberately
insecure fixture fails."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from refarch.pytest.tools import needs_tool

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = shutil.which("checkov", path=str(Path(sys.executable).parent)) or shutil.which("checkov")
pytestmark = needs_tool("checkov", "checkov (tox -e policy installs it)", present=CHECKOV is not None)


def scan(directory: Path) -> tuple[int, list[tuple[str, str]]]:
    r = subprocess.run(
        [CHECKOV, "-d", str(directory), "--framework", "terraform", "--external-checks-dir",
         str(ROOT / "ci" / "checkov"), "--skip-download", "--quiet", "-o", "json"],
        capture_output=True, text=True, timeout=600, check=False)
    data = json.loads(r.stdout)
    reports = data if isinstance(data, list) else [data]
    failed = [(c["check_id"], c["resource"]) for rep in reports for c in rep["results"]["failed_checks"]]
    return r.returncode, failed


def test_descriptors_pass_the_policy_scan():
    rc, failed = scan(ROOT / "descriptors" / "terraform")
    assert rc == 0 and failed == [], f"policy findings in descriptors/terraform: {failed}"


def test_insecure_fixture_is_caught():
    rc, failed = scan(ROOT / "tests" / "policy" / "fixtures" / "insecure")
    assert rc != 0
    assert ("CKV2_REFARCH_1", "openstack_networking_secgroup_rule_v2.all_tcp_world") in failed
    assert ("CKV2_REFARCH_1", "openstack_networking_secgroup_rule_v2.udp_no_source") in failed
