"""``ci/bootstrap.sh`` on a fresh machine: a container made from a bare
Debian root (debootstrap minbase, the same way the node image is made,
nothing else installed) plus Terraform gets the checkout, runs the
bootstrap, finds every command of ci/host-commands.tsv, and then runs every
stage that needs no cluster (:data:`STAGES`) as a user would: a command that
a stage or a tool it drives calls and that the bootstrap did not install
fails naming the stage and the command.

A machine where someone once installed a tool by hand hides a missing
install step; this one has nothing.  (``tox -e fresh``, run by ci/test.sh.)
"""

import os
import re
import shutil
from pathlib import Path

import pytest

from refarch import proc
from refarch.paths import runs_dir
from refarch.pytest.tools import needs_tool
from refarch.tools import debootstrap, hostcmds
from tests.lifecycle.suite import checkout_copy

pytestmark = [needs_tool("podman", "podman (ci/bootstrap.sh installs it)"),
              needs_tool("debootstrap", "debootstrap (ci/bootstrap.sh installs it)")]

#: The site's extra CA certificates and pip's setting to use the system
#: bundle are part of this kind of machine (a TLS-intercepting proxy on the
#: way to PyPI); a fresh one has them too.  Debian's ca-certificates, which
#: the bootstrap pulls in, adds them to the bundle.
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

#: The stages that need no cluster, run after the bootstrap as a user on a
#: new machine would run them.  ``pipeline`` runs the lint, policy and unit
#: jobs in gitlab-ci-local's shell executor (so those stages run here too,
#: through the tools that drive them: gitlab-ci-local calls rsync and git);
#: ``report`` renders a recorded run's report in Debian's Chromium.
STAGES = ("pipeline", "report")

#: PATH of a fresh Debian root (the Go toolchain's bin goes before it).
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: After the bootstrap: one line per command of the table that is not found,
#: then each stage's verdict ("stage NAME: passed" / "stage NAME: FAILED")
#: followed, on failure, by its output.
CHECK = r"""
set -u
cd /work/checkout
ci/bootstrap.sh || { echo "bootstrap: FAILED"; exit 1; }
echo "bootstrap: done"
missing=0
while IFS=$'\t' read -r cmd pkg stages why; do
    case "$cmd" in ''|'#'*) continue ;; esac
    case "$cmd" in /*) [ -e "$cmd" ] ;; *) command -v "$cmd" >/dev/null 2>&1 ;; esac \
        || { echo "missing: $cmd ($pkg)"; missing=1; }
done < ci/host-commands.tsv
.venv/bin/tox --version
# The copy has no git data: commit it as a clone of the checkout would be.
git init -q -b main && git add -A && git -c user.name=fresh -c user.email=fresh@localhost commit -qm checkout \
    || { echo "git: FAILED"; exit 1; }
for stage in $STAGES; do
    if .venv/bin/tox -e "$stage" >"/tmp/stage-$stage.log" 2>&1; then
        echo "stage $stage: passed"
        grep -E "^(=+ .* in [0-9.]+s|  $stage: (OK|FAIL))" "/tmp/stage-$stage.log" || true
    else
        echo "stage $stage: FAILED"
        cat "/tmp/stage-$stage.log"
        missing=1
    fi
done
exit $missing
"""


#: Seconds the fresh machine may run (podman kills the container then:
#: a test that stops waiting must not leave it running).  The bootstrap and
#: the pipeline stage took 4-24 min on this kind of machine, up to 30 beside
#: CI's other lanes with the role scenarios cold; pytest waits a little longer.
FRESH_LIMIT_S = 3000


@pytest.mark.timeout(FRESH_LIMIT_S + 300)
def test_bootstrap_on_a_fresh_machine_provides_every_host_command_and_runs_the_cluster_free_stages(tmp_path):
    tag = debootstrap.ensure_fresh_image(tmp_path / "image.log")
    copy = checkout_copy(tmp_path / "checkout")
    terraform = shutil.which("terraform")
    ca = ["-v", f"{EXTRA_CA_DIR}:{EXTRA_CA_DIR}:ro", "-e", f"PIP_CERT={CA_BUNDLE}", "-e", f"SSL_CERT_FILE={CA_BUNDLE}",
          "-e", f"NODE_EXTRA_CA_CERTS={CA_BUNDLE}"] if EXTRA_CA_DIR.is_dir() else []
    # Package downloads are cached on the host (uv's cache): what is
    # installed still comes from the bootstrap alone.
    uv_cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    uv_cache.mkdir(parents=True, exist_ok=True)
    # Go is part of this kind of machine, not of Debian (as terraform): the
    # host's toolchain, and its module and build caches like uv's.
    go_root = Path(shutil.which("go")).resolve().parent.parent
    go_caches = {k: proc.run(["go", "env", k], timeout_s=30).stdout.strip() for k in ("GOMODCACHE", "GOCACHE")}
    for path in go_caches.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    go = ["-v", f"{go_root}:/usr/local/go:ro", "-e", "PATH=/usr/local/go/bin:" + FRESH_PATH,
          *[a for k, path in go_caches.items() for a in ("-v", f"{path}:/root/.cache/fresh-{k}", "-e",
                                                           f"{k}=/root/.cache/fresh-{k}")]]
    r = proc.run(["podman", "run", "--rm", "--runtime", "runc", "--timeout", str(FRESH_LIMIT_S),
                  "--ulimit", "nofile=4096:8192", "--ulimit", "nproc=4096:8192",
                  "-v", f"{copy}:/work/checkout", "-v", f"{terraform}:/usr/local/bin/terraform:ro",
                  "-v", f"{uv_cache}:/root/.cache/uv", *go, "-e", "STAGES=" + " ".join(STAGES), *ca,
                  tag, "bash", "-c", CHECK], timeout_s=FRESH_LIMIT_S + 120, check=False, log=tmp_path / "fresh.log")
    out = (r.stdout or "") + (r.stderr or "")
    kept = runs_dir() / "fresh.log"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "fresh.log", kept)
    assert "bootstrap: done" in out, f"ci/bootstrap.sh failed on a fresh machine (exit {r.returncode}):\n{out[-3000:]}"
    done = re.findall(r"^stage (\S+): (?:passed|FAILED)$", out, re.M)
    # The check's own exits are 0 and 1; podman's kill at --timeout is 255.
    assert r.returncode in (0, 1) or len(done) == len(STAGES), (
        f"the fresh machine stopped (exit {r.returncode}; podman --timeout kills it after {FRESH_LIMIT_S} s) "
        f"after stages {done} of {list(STAGES)} (whole output: {kept})")
    missing = [line for line in out.splitlines() if line.startswith("missing: ")]
    assert not missing, f"after ci/bootstrap.sh: {missing}"
    failures = hostcmds.stage_failures(out)
    assert not failures, "\n".join(failures) + f"\n(whole output: {kept})"
    ran = re.findall(r"^stage (\S+): passed$", out, re.M)
    assert ran == list(STAGES) and r.returncode == 0, f"stages passed: {ran} (exit {r.returncode}):\n{out[-2000:]}"
    # The pipeline stage ran its gitlab-ci-local jobs (lint, policy, unit), not only the job lists.
    assert re.search(r"^=+ (1[0-9]|[2-9][0-9]) passed", out, re.M), f"the stages ran too few tests:\n{out[-2000:]}"
    assert len(hostcmds.load_table()) > 10
