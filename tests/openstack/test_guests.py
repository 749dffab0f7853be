"""The seed's own path on OpenStack-made guests: the all-in-one in guests
mode (refarch/clouds/aio) boots the suite's guest image from the OpenStack
module, and the main job runs against it as it runs anywhere: apply, boot,
strict host keys from the first SSH through the floating IP, Ansible through
the bastion, every node and cluster check, the smoke job, the properties,
destroy and the leak check.  At the end the all-in-one is stopped and the
host is compared with how it was before: no container, network, link,
namespace, qemu process or listening port of it is left.

Run with ``ci/tox -e openstack-guests``; a kept all-in-one
(``refarch aio up``, or ``$REFARCH_AIO_RUN_ID``) is used and left running.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refarch.clouds import aio as aio_mod
from refarch.clouds import local as localcloud
from refarch.clouds import openstack as ostk
from refarch.cluster import Cluster
from refarch.errors import CommandError
from refarch.profile import load_profile
from refarch.properties import exposure as exposure_property
from refarch.pytest.state import say

PROFILE = "openstack-aio-guests"
ROOT = Path(__file__).resolve().parents[2]

#: The host before the all-in-one started (see :func:`_host`).
BEFORE: dict[str, set[str]] = {}
OWNED: list[bool] = []


def _host() -> dict[str, set[str]]:
    """What of the host an all-in-one could leave: listening TCP and UDP
    sockets, links, named network namespaces and qemu processes."""
    def lines(cmd: list[str]) -> list[str]:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()

    return {
        "listening": {f"{line.split()[0]} {line.split()[4]}" for line in lines(["ss", "-Htuln"]) if len(line.split()) > 4},
        "links": {line.split(":")[1].strip().split("@")[0] for line in lines(["ip", "-o", "link"]) if ":" in line},
        "netns": {line.split()[0] for line in lines(["ip", "netns", "list"]) if line.strip()},
        "qemu": {proc.parent.name for proc in Path("/proc").glob("[0-9]*/comm") if _comm(proc).startswith("qemu-system")},
    }


def _comm(path: Path) -> str:
    """A process's command name from /proc ("" once it is gone)."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _say(request, line: str) -> None:
    say(request.config, f"openstack-guests: {line}")


@pytest.fixture(scope="module")
def aio(request):
    """The guests-mode all-in-one: the one named or kept, else one started
    here and stopped by the last test (or at the end, whatever failed)."""
    BEFORE.update(_host())
    started = time.monotonic()
    a, owned = aio_mod.use(load_profile(PROFILE), "guests")
    OWNED[:] = [owned]
    _say(request, f"all-in-one {a.run_id} ({'started' if owned else 'kept'}) in {time.monotonic() - started:.0f} s")
    yield a
    if owned and not a.rundir.read_meta().get("destroyed"):
        aio_mod.stop(a)


#: Seconds the main job on guests may take: every phase under QEMU's TCG
#: (apply and boot 165 s, the playbook 583 s, its idempotence re-run about
#: as long, then the checks and the smoke job), with room.
MAIN_JOB_LIMIT_S = 5400


@pytest.mark.timeout(MAIN_JOB_LIMIT_S + 600)
def test_the_main_job_passes_on_openstack_made_guests(aio, request):
    env = {**os.environ, aio_mod.ENV_RUN_ID: aio.run_id, "PYTHONUNBUFFERED": "1"}
    # Beside the all-in-one's logs: pytest's temporary folders are pruned
    # by any other pytest session of this user while the job still runs.
    log = aio.rundir.logs / "main-job.log"
    with open(log, "w", encoding="utf-8") as out:
        job = subprocess.Popen([sys.executable, "-m", "pytest", "tests/integration", "--profile", PROFILE,
                                "-p", "no:cacheprovider"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            rc = job.wait(timeout=MAIN_JOB_LIMIT_S)
        finally:
            if job.poll() is None:  # past the limit or interrupted: it tears down, then it is gone
                os.killpg(job.pid, signal.SIGTERM)
                try:
                    job.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
    text = log.read_text(encoding="utf-8", errors="replace")
    runs = sorted((ROOT / "runs").glob("hvd-*/results.json"), key=lambda p: p.stat().st_mtime)
    summary = ""
    if runs:
        results = json.loads(runs[-1].read_text())
        phases = results.get("phases") or results.get("phase_timings") or {}
        summary = f"run {results.get('run_id')}: phases (s) {json.dumps(phases)}"
        _say(request, summary)
    assert rc == 0, f"the main job on {PROFILE} exited {rc}: " + " | ".join(text.splitlines()[-15:])


def test_a_server_nova_cannot_place_is_named_with_its_fault_and_destroyed(aio, request):
    """nova-compute disabled: the scheduler finds no valid host, the
    servers go to ERROR and Terraform's apply fails with "unexpected state
    'ERROR'"; the run names each node with Nova's fault before any SSH, and
    destroy (with the servers in ERROR) leaves nothing."""
    admin = ostk.connect(aio_mod.ADMIN_CLOUD)
    service = next(s for s in admin.compute.services() if s.binary == "nova-compute")
    admin.compute.disable_service(service, disabled_reason="refarch fault case: no valid host")
    cluster = Cluster.create(PROFILE, overrides=aio.overrides())
    started = time.monotonic()
    try:
        with pytest.raises(CommandError) as caught:
            cluster.deploy()
        took_s = time.monotonic() - started
    finally:
        admin.compute.enable_service(service)
        report = cluster.destroy()
    message = str(caught.value)
    assert re.match(r"^node\d: server in ERROR: No valid host was found", message), message
    assert report["leaks"] == {} and report["state"] == [], report
    assert not (cluster.rundir.logs / "ansible.log").exists(), "Ansible ran against servers in ERROR"
    _say(request, f"no valid host: named in {took_s:.0f} s: {message[:160]}; destroy left nothing")


def test_ssh_open_to_the_world_is_found_by_the_outside_probe(aio, request):
    """A security group rule admitting tcp/22 from 0.0.0.0/0 (the
    commonest slip in a cloud's console): the outside probe, outside the
    admin range, finds sshd open on every node, through node1's floating
    IP and through the router at the others' fixed addresses, named with
    the node, address and port; the run's own rules alone let it find
    nothing.  No configuration is needed: sshd listens once the guests
    have booted."""
    cluster = Cluster.create(PROFILE, overrides=aio.overrides())
    try:
        cluster.deploy()
        names = {n.address: n.name for n in cluster.contract.nodes}
        before = cluster.driver.survey_exposure(cluster.context)["outside"]
        conn = cluster.driver.conn(cluster.context)
        group = conn.network.find_security_group(f"{cluster.run_id}-cluster", ignore_missing=False)
        conn.network.create_security_group_rule(security_group_id=group.id, direction="ingress", ethertype="IPv4",
                                                protocol="tcp", port_range_min=22, port_range_max=22,
                                                remote_ip_prefix="0.0.0.0/0", description="refarch fault case")
        started = time.monotonic()
        after = cluster.driver.survey_exposure(cluster.context)["outside"]
        took_s = time.monotonic() - started
    finally:
        report = cluster.destroy()
    assert all(before.reached[a] > 0 for a in names), f"the outside probe reached only {before.reached}"
    assert exposure_property.unexpected(before, [], names) == [], before.as_dict()
    found = exposure_property.unexpected(after, [], names)
    assert found == [f"{name} {address} tcp/22" for address, name in sorted(names.items())], after.as_dict()
    assert report["leaks"] == {} and report["state"] == [], report
    _say(request, f"tcp/22 from 0.0.0.0/0: the outside probe found {'; '.join(found)} in {took_s:.0f} s "
                  f"(before the rule: nothing open, {sum(before.reached.values())} packets sent, "
                  f"{before.dropped} dropped); destroy left nothing")


def test_stopping_the_all_in_one_leaves_nothing_on_the_host(aio, request):
    if not OWNED or not OWNED[0]:
        pytest.skip(f"the all-in-one {aio.run_id} is kept: it stays running")
    aio_mod.stop(aio)
    found = localcloud.run_resources(aio.run_id)
    assert not found["containers"] and not found["networks"], found
    after = _host()
    left = {kind: sorted(after[kind] - BEFORE.get(kind, set())) for kind in after}
    left = {kind: items for kind, items in left.items() if items}
    assert aio.host_link not in after["links"], f"the all-in-one's link {aio.host_link} is left"
    assert not left, f"left on the host after the all-in-one {aio.run_id} stopped: {left}"
    _say(request, f"stopped {aio.run_id}: no container, network, link, namespace, qemu process or listening "
                  f"port of it left ({len(after['links'])} links, {len(after['listening'])} sockets as before)")
