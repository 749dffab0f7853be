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
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

from refarch.clouds import aio as aio_mod
from refarch.clouds import local as localcloud
from refarch.clouds import openstack as ostk
from refarch.clouds.aio import footprint
from refarch.clouds.exposure import host_netns
from refarch.cluster import Cluster
from refarch.errors import CommandError, RefarchError
from refarch.paths import TERRAFORM_DIR
from refarch.profile import load_profile
from refarch.properties import exposure as exposure_property
from refarch.pytest.state import say

PROFILE = "openstack-aio-guests"
ROOT = Path(__file__).resolve().parents[2]

#: The host before the all-in-one started (see :func:`_host`), for the
#: figures the last test prints; what it must not leave is :data:`HELD`.
BEFORE: dict[str, set[str]] = {}
#: What of the host the all-in-one held (refarch.clouds.aio.footprint),
#: read after it started and again before it stops.
HELD: dict[str, set[str]] = {}
OWNED: list[bool] = []


def _host() -> dict[str, set[str]]:
    """What of the host an all-in-one could leave: listening TCP and UDP
    sockets, links, named network namespaces and qemu processes."""
    def lines(cmd: list[str]) -> list[str]:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()

    return {
        "listening": {f"{line.split()[0]} {line.split()[4]}" for line in lines(["ss", "-Htuln"]) if len(line.split()) > 4},
        "links": {line.split(":")[1].strip().split("@")[0] for line in lines(["ip", "-o", "link"]) if ":" in line},
        "netns": set(host_netns()),
        "qemu": footprint.qemu_pids(),
    }


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
    HELD.update(footprint.held(a))
    _say(request, f"all-in-one {a.run_id} ({'started' if owned else 'kept'}) in {time.monotonic() - started:.0f} s")
    yield a
    if owned and not a.rundir.read_meta().get("destroyed"):
        aio_mod.stop(a)


#: Seconds the main job on guests may take: every phase under QEMU's TCG
#: (measured whole in run hvd-root-wenwh3: 5072 s; apply and boot 255 s,
#: the playbook 828 s, the checks 183 s, the idempotence re-run 655 s, the
#: smoke job 2543 s, np=2 1743 s of it), with room.
MAIN_JOB_LIMIT_S = 7200


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
    # The job's own run (its first line names it), not the newest in runs/.
    named = re.search(r"^refarch: run (hvd-\S+?),", text, re.M)
    results_file = ROOT / "runs" / named[1] / "results.json" if named else None
    if results_file is not None and results_file.exists():
        results = json.loads(results_file.read_text())
        _say(request, f"run {named[1]}: phases (s) {json.dumps(results.get('phases_s') or {})}")
    assert rc == 0, f"the main job on {PROFILE} exited {rc}: " + " | ".join(text.splitlines()[-15:])


def test_a_server_nova_cannot_place_is_named_with_its_fault_and_destroyed(aio, request):
    """nova-compute disabled: the scheduler finds no valid host, the
    servers go to ERROR and Terraform's apply fails with "unexpected state
    'ERROR'"; the run names each node with Nova's fault before any SSH, and
    destroy (with the servers in ERROR) leaves nothing."""
    cluster, message, took_s = _deploy_that_fails(aio, CommandError, broken=_nova_compute_disabled())
    assert re.match(r"^node\d: server in ERROR: No valid host was found", message), message
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


def _module_copy(cluster: Cluster, edit) -> Path:
    """The run's root module as a copy of the OpenStack module that
    ``edit(folder)`` changes before the first ``terraform init`` (the
    run's Terraform copies the module only into an empty folder)."""
    folder = cluster.rundir.terraform_dir
    shutil.copytree(TERRAFORM_DIR / "openstack", folder)
    shutil.copytree(TERRAFORM_DIR / "modules", folder.parent / "modules", dirs_exist_ok=True)
    edit(folder)
    return folder


@contextmanager
def _nova_compute_disabled():
    """nova-compute disabled in the all-in-one, enabled again on exit."""
    admin = ostk.connect(aio_mod.ADMIN_CLOUD)
    service = next(s for s in admin.compute.services() if s.binary == "nova-compute")
    admin.compute.disable_service(service, disabled_reason="refarch fault case: no valid host")
    try:
        yield
    finally:
        admin.compute.enable_service(service)


def _deploy_that_fails(aio, error: type[Exception], edit=None, broken=None) -> tuple[Cluster, str, float]:
    """Deploy a new cluster on ``aio`` (its module first changed by
    ``edit(folder)``, when given; inside the context manager ``broken``,
    when given, which mends the cloud before destroy) that must fail with
    ``error``; destroy it and check destroy left nothing.  Returns the
    cluster, the failure's message and the seconds until it was named."""
    cluster = Cluster.create(PROFILE, overrides=aio.overrides())
    if edit is not None:
        _module_copy(cluster, edit)
    started = time.monotonic()
    try:
        with broken or nullcontext(), pytest.raises(error) as caught:
            cluster.deploy()
        took_s = time.monotonic() - started
    finally:
        report = cluster.destroy()
    assert report["leaks"] == {} and report["state"] == [], report
    return cluster, str(caught.value), took_s


#: Terraform's override file (merged into main.tf's resource): node2's user
#: data is a cloud-config whose runcmd fails, as a slip in user data does.
FAILING_USER_DATA = """\
resource "openstack_compute_instance_v2" "node" {
  user_data = count.index == 1 ? "#cloud-config\\nruncmd:\\n  - [sh, -c, 'echo refarch fault case: the user data fails >&2; exit 3']\\n" : templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    hostname        = local.nodes[count.index].hostname
    host_key        = local.host_keys[count.index].private
    host_public_key = local.host_keys[count.index].public
  })
}
"""


def test_a_guest_whose_user_data_fails_is_named_from_its_console_log(aio, request):
    """node2's user data runs a command that fails: cloud-init says so on
    the guest's console, and the run names node2 and cloud-init's words from
    the console log (Nova's os-getConsoleOutput) once its final stage has
    run, not as an SSH timeout; destroy leaves nothing."""
    cluster, message, took_s = _deploy_that_fails(
        aio, RefarchError, lambda folder: (folder / "fault_override.tf").write_text(FAILING_USER_DATA))
    assert re.match(r"^node2: cloud-init failed \(console log\): .*(scripts-user|Failed to run module)", message), message
    assert not (cluster.rundir.logs / "ansible.log").exists(), "Ansible ran against a guest whose user data failed"
    _say(request, f"failing user data: named in {took_s:.0f} s: {message[:200]}; destroy left nothing")


def _floating_ip_before_the_router_interface(folder: Path) -> None:
    """Break the module's ordering: the floating IP is associated first and
    the router interface waits for it."""
    main = folder / "main.tf"
    text = main.read_text(encoding="utf-8")
    order = "  depends_on  = [openstack_networking_router_interface_v2.cluster]\n"
    assert order in text, "the module no longer orders the floating IP after the router interface"
    text = text.replace(order, "")
    interface = "  subnet_id = openstack_networking_subnet_v2.cluster.id\n"
    assert interface in text
    text = text.replace(interface, interface + "  depends_on = [openstack_networking_floatingip_associate_v2.bastion]\n")
    main.write_text(text, encoding="utf-8")


def test_a_floating_ip_made_before_the_router_interface_is_named_as_neutrons_error(aio, request):
    """The floating IP associated before the subnet has a router interface:
    Neutron refuses it (the external network is not reachable from the
    subnet), apply fails quoting Neutron, no node is waited for; destroy
    leaves nothing."""
    _, message, took_s = _deploy_that_fails(aio, CommandError, _floating_ip_before_the_router_interface)
    assert re.search(r"ExternalGatewayForFloatingIPNotFound|is not reachable from subnet", message), message
    _say(request, f"floating IP before the router interface: named in {took_s:.0f} s: {message[-240:]}; "
                  "destroy left nothing")


def test_stopping_the_all_in_one_leaves_nothing_on_the_host(aio, request):
    """Stopping the all-in-one removes its container and network, and
    nothing it held on the host is left: its bridge, veths and external
    link, its network namespace (the agents' bridges, taps and router
    namespaces, and every service's socket, were inside it) and the guests'
    QEMU processes.  Judged by what it held, not by a before/after diff:
    other runs on a shared machine change the host meanwhile."""
    if not OWNED or not OWNED[0]:
        pytest.skip(f"the all-in-one {aio.run_id} is kept: it stays running")
    for kind, items in footprint.held(aio).items():
        HELD.setdefault(kind, set()).update(items)
    assert HELD.get("links") and HELD.get("netns"), f"nothing of {aio.run_id} was found on the host: {HELD}"
    aio_mod.stop(aio)
    found = localcloud.run_resources(aio.run_id)
    assert not found["containers"] and not found["networks"], found
    left = footprint.left(HELD)
    assert not left, f"left on the host after the all-in-one {aio.run_id} stopped: {left}"
    after = _host()
    _say(request, f"stopped {aio.run_id}: none of what it held is left ({', '.join(sorted(HELD['links']))}; "
                  f"netns {', '.join(sorted(HELD['netns']))}; {len(HELD.get('qemu', ()))} qemu processes seen); "
                  f"host links {len(BEFORE.get('links', ()))} before, {len(after['links'])} after; listening sockets "
                  f"{len(BEFORE.get('listening', ()))} before, {len(after['listening'])} after")
