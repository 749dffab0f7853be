"""``ci/bootstrap.sh`` on a fresh machine: a container made from a bare
Debian root (debootstrap minbase, the same way the node image is made,
nothing else installed) plus Terraform gets the checkout, runs the
bootstrap, and then finds every command of ci/host-commands.tsv.

A machine where someone once installed a tool by hand hides a missing
install step; this one has nothing.  (``tox -e fresh``, run by ci/test.sh.)
"""

import shutil
from pathlib import Path

import pytest

from refarch import hostcmds, image, proc
from tests.lifecycle.suite import checkout_copy

pytestmark = pytest.mark.skipif(not shutil.which("podman") or not shutil.which("debootstrap"),
                                reason="needs podman and debootstrap (ci/bootstrap.sh installs them)")

#: The site's extra CA certificates and pip's setting to use the system
#: bundle are part of this kind of machine (a TLS-intercepting proxy on the
#: way to PyPI); a fresh one has them too.  Debian's ca-certificates, which
#: the bootstrap pulls in, adds them to the bundle.
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

#: After the bootstrap: one line per command of the table that is not found.
CHECK = r"""
set -eu
cd /work/checkout
ci/bootstrap.sh
echo "bootstrap: done"
missing=0
while IFS=$'\t' read -r cmd pkg stages why; do
    case "$cmd" in ''|'#'*) continue ;; esac
    if ! command -v "$cmd" >/dev/null 2>&1; then echo "missing: $cmd ($pkg)"; missing=1; fi
done < ci/host-commands.tsv
.venv/bin/tox --version
exit $missing
"""


def test_bootstrap_on_a_fresh_machine_provides_every_host_command(tmp_path):
    tag = image.ensure_fresh_image(tmp_path / "image.log")
    copy = checkout_copy(tmp_path / "checkout")
    terraform = shutil.which("terraform")
    ca = ["-v", f"{EXTRA_CA_DIR}:{EXTRA_CA_DIR}:ro", "-e", f"PIP_CERT={CA_BUNDLE}"] if EXTRA_CA_DIR.is_dir() else []
    r = proc.run(["podman", "run", "--rm", "--runtime", "runc",
                  "--ulimit", "nofile=1024:4096", "--ulimit", "nproc=4096:8192",
                  "-v", f"{copy}:/work/checkout", "-v", f"{terraform}:/usr/local/bin/terraform:ro", *ca,
                  tag, "bash", "-c", CHECK], timeout=1200, check=False, log=tmp_path / "fresh.log")
    out = (r.stdout or "") + (r.stderr or "")
    assert "bootstrap: done" in out, f"ci/bootstrap.sh failed on a fresh machine (exit {r.returncode}):\n{out[-3000:]}"
    missing = [line for line in out.splitlines() if line.startswith("missing: ")]
    assert not missing and r.returncode == 0, f"after ci/bootstrap.sh: {missing or out[-2000:]}"
    assert len(hostcmds.load_table()) > 10
