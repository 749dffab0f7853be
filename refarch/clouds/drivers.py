"""Cloud drivers: what differs between the local cloud and OpenStack.

The OpenStack driver lives in :mod:`refarch.clouds.openstack_cloud`.
Everything after ``terraform apply`` reads the cluster contract and does not
care which cloud made the nodes; before and around it, a driver supplies the
preflight, the build artefacts, Terraform's inputs and environment, the
sweep by run id, the leak check and the end of the run.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import proc
from ..errors import PreflightError, RefarchError
from ..owner import Owner
from ..profile import Profile
from ..tools import ansible
from . import exposure, image, wheelhouse
from . import local as localcloud
from .openstack_cloud import OpenStackCloud
from .protocol import FAILURE_MODES, CloudDriver, Prepared, RunContext  # noqa: F401 (FAILURE_MODES: re-exported)


class LocalCloud:
    """podman "machines" on this host (descriptors/terraform/local); a
    :class:`~refarch.clouds.protocol.CloudDriver`."""

    name = "local"
    on_this_machine = True

    @staticmethod
    def preflight(profile: Profile) -> None:
        """See CloudDriver.preflight."""
        localcloud.preflight_tools()
        ansible.preflight()
        if profile.shared_storage.type != "sshfs":
            raise PreflightError("the local cloud implements shared storage type sshfs only")
        if profile.expect.gpus_per_node:
            raise PreflightError(f"profile {profile.name} expects GPUs; the local cloud has none")

    def prepared(self, run: RunContext) -> bool:
        """See CloudDriver.prepared: the cluster has an image and a wheelhouse."""
        return bool(run.image_tag and run.wheelhouse)

    def prepare(self, run: RunContext) -> Prepared:
        """See CloudDriver.prepare: node image and wheelhouse (both cached),
        recorded in ``run.json`` (``image``, ``wheelhouse``)."""
        t = run.profile.timeouts_s
        with run.phase("image"):
            tag = image.ensure_image(run.rundir.logs / "image.log", timeout_s=t.image)
        with run.phase("wheel"):
            wheels = wheelhouse.ensure_wheelhouse(tag, run.rundir.logs / "wheel.log", timeout_s=t.wheel,
                                                  ca_files=run.profile.ca_files())
        run.rundir.update_meta(image=tag, wheelhouse=str(wheels))
        return Prepared(image_tag=tag, wheelhouse=wheels)

    def tf_vars(self, run: RunContext, key: Path, known_hosts: Path) -> dict:
        """See CloudDriver.tf_vars (reserves the run's subnet block)."""
        net = run.profile.network
        owner = Owner.current(run.rundir.path)  # the deploying process labels what it makes
        # One block of twice the size: the cluster's subnet, and beside it the
        # probe subnet whose first half is the run's admin range (the exposure
        # probes stand there and outside it).
        block = localcloud.reserve_subnet(net.subnet_pool, net.subnet_prefix - 1, run.run_id, owner)
        subnet, probe_subnet = localcloud.split_block(block)
        admin_cidr = localcloud.probe_ranges(probe_subnet)["admin"]
        run.rundir.update_meta(subnet=subnet, probe_subnet=probe_subnet, owner=owner.labels())
        storage = run.profile.shared_storage
        return {
            "run_id": run.run_id,
            "node_count": run.profile.nodes.count,
            "subnet_cidr": subnet,
            "image": run.image_tag,
            "flavor": {"memory_mb": run.profile.nodes.flavor.memory_mb},
            "ssh_public_key_file": f"{key}.pub",
            "ssh_private_key_file": str(key),
            "ssh_known_hosts_file": str(known_hosts),
            "shared_storage": {"export": storage.export, "mount_point": storage.mount_point},
            "labels": owner.labels(),
            "admin_cidrs": [admin_cidr],
        }

    def await_nodes(self, run: RunContext, names: list[str], timeout_s: float) -> dict[str, float]:
        """See CloudDriver.await_nodes: nothing to wait for."""
        return {name: 0.0 for name in names}

    def apply_failure(self, run: RunContext) -> list[str]:
        """See CloudDriver.apply_failure: Terraform's own error says it all."""
        return []

    def tf_env(self, run: RunContext) -> dict:
        """See CloudDriver.tf_env: nothing."""
        return {}

    def ansible_vars(self, run: RunContext) -> dict:
        """See CloudDriver.ansible_vars: the cached wheelhouse.

        Raises:
            RefarchError: the run was not prepared (no wheelhouse).
        """
        if run.wheelhouse is None:
            raise RefarchError(f"run {run.run_id} has no wheelhouse: prepare it first (Cluster.prepare)")
        return {"horovod_wheelhouse_src": str(run.wheelhouse)}

    def stop_node(self, run: RunContext, name: str) -> None:
        """Power the node off (systemd in the container shuts down cleanly)."""
        proc.run(["podman", "stop", "-t", "30", f"{run.run_id}-{name}"], timeout_s=90)

    def start_node(self, run: RunContext, name: str) -> None:
        """Power the node on again: same address, same disk, a fresh boot."""
        proc.run(["podman", "start", f"{run.run_id}-{name}"], timeout_s=90)

    def fail_node(self, run: RunContext, name: str, mode: str) -> None:
        """Make node ``name`` fail as ``mode`` (:data:`FAILURE_MODES`) says:
        ``stop`` as :meth:`stop_node`; ``kill`` as a power cut: the node's
        network goes silent, then SIGKILL to the container (systemd and every
        process die at once, nothing is shut down; the FIN the kernel sends
        for each socket of a killed process never leaves the node: measured,
        SIGKILL alone let the peers see "Connection closed by remote host"
        and go on within 0.8 s, which is a clean failure, not a power cut);
        ``partition`` an nftables table in the node's network namespace drops
        every packet in and out but loopback's (the node runs on, its
        connections get no answer and no reset)."""
        container = f"{run.run_id}-{name}"
        if mode == "stop":
            self.stop_node(run, name)
        elif mode == "kill":
            proc.in_netns(container, "nft", "-f", "-", input_text=localcloud.partition_ruleset())
            proc.run(["podman", "kill", "--signal", "KILL", container], timeout_s=60)
        elif mode == "partition":
            proc.in_netns(container, "nft", "-f", "-", input_text=localcloud.partition_ruleset())
        else:
            raise ValueError(f"failure mode {mode!r}: not one of {', '.join(FAILURE_MODES)}")

    def restore_node(self, run: RunContext, name: str, mode: str) -> None:
        """Undo :meth:`fail_node`: start the node again (stop, kill) or
        delete the partition table (the node's connections go on)."""
        if mode == "partition":
            container = f"{run.run_id}-{name}"
            if proc.in_netns(container, "nft", "list", "table", "inet", localcloud.PARTITION_TABLE, check=False).returncode == 0:
                proc.in_netns(container, "nft", "delete", "table", "inet", localcloud.PARTITION_TABLE)
        else:
            self.start_node(run, name)

    def node_state(self, run: RunContext, name: str) -> str:
        """"running", "stopped" (exited, stopped, created) or podman's own
        state name of the node's container."""
        r = proc.run(["podman", "inspect", "--format", "{{.State.Status}}", f"{run.run_id}-{name}"],
                     timeout_s=60, check=False)
        status = r.stdout.strip() or "missing"
        return {"running": "running", "exited": "stopped", "stopped": "stopped",
                "created": "stopped"}.get(status, status)

    def node_console(self, run: RunContext, name: str) -> list[str] | None:
        """See CloudDriver.node_console: ``podman exec`` into the node's container."""
        return ["podman", "exec", f"{run.run_id}-{name}"]

    def survey_exposure(self, run: RunContext) -> dict:
        """See CloudDriver.survey_exposure: the probes stand in the run's
        probe subnet (``run.json``), outside and inside its admin range, and
        the run's nftables table counts what it dropped."""
        contract = run.contract
        probe_subnet = run.rundir.read_meta().get("probe_subnet")
        table = contract.network_policy.get("table")
        if not probe_subnet or not table:
            missing = " and ".join(what for what, have in (("a probe subnet (run.json)", probe_subnet),
                                                            ("a network policy table (contract)", table)) if not have)
            raise RefarchError(f"run {run.run_id} has no {missing}: the exposure survey cannot run; deploy it "
                               "again with this suite")
        probes = exposure.plan_probes(run.run_id, localcloud.probe_ranges(probe_subnet))
        nodes = {n.address: n.name for n in contract.nodes}
        exposure.remove_probes(run.run_id)  # what an interrupted scan of this run left
        try:
            for probe in probes:
                exposure.create_probe(probe)
            return exposure.survey(run.run_id, probes, nodes,
                                   {name: f"{run.run_id}-{name}" for name in nodes.values()}, table)
        finally:
            exposure.remove_probes(run.run_id)

    def sweep(self, run: RunContext, log: Path) -> dict:
        """See CloudDriver.sweep: containers, networks, volumes, nftables
        tables and probe namespaces of the run."""
        return {k: v for k, v in localcloud.sweep(run.run_id, log).items() if v}

    def leaks(self, run: RunContext) -> dict:
        """See CloudDriver.leaks (with the host side of the run's subnet)."""
        return localcloud.leaks(run.run_id, run.rundir.read_meta().get("subnet"))

    def finish(self, run: RunContext) -> None:
        """Nothing outlives the run: release its subnet reservation."""
        localcloud.release_subnet(run.run_id)

    @staticmethod
    def sweep_stale(out=print) -> list[str]:
        """Sweep runs whose owner process is gone (any checkout's), before a
        new run is created."""
        return localcloud.sweep_stale(out=out)


#: Fault cases only (refarch.faults.catalogue): ``stop-ignored`` gives a driver whose
#: stop is accepted and does nothing, as an OpenStack server that stays
#: ACTIVE after a stop call.
FAULT_DRIVER_ENV = "REFARCH_FAULT_DRIVER"


class StopIgnored:
    """A cloud driver whose ``stop_node`` returns without stopping anything
    (every other call goes to ``driver``): what the availability properties
    must notice before they time anything."""

    def __init__(self, driver):
        self._driver = driver

    def stop_node(self, run: RunContext, name: str) -> None:
        return None

    def fail_node(self, run: RunContext, name: str, mode: str) -> None:
        """A stop or power-off the cloud accepts and does not carry out; a
        partition is carried out."""
        if mode == "partition":
            self._driver.fail_node(run, name, mode)

    def __getattr__(self, attr):
        return getattr(self._driver, attr)


#: The driver class of each profile ``cloud``: a new cloud is a driver here
#: and a profile.
DRIVERS: dict[str, type] = {"local": LocalCloud, "openstack": OpenStackCloud}


def driver_for(profile: Profile) -> CloudDriver:
    """The cloud driver of ``profile.cloud`` (wrapped in a fault case's
    faulty driver when :data:`FAULT_DRIVER_ENV` names one)."""
    driver = DRIVERS[profile.cloud]()
    fault = os.environ.get(FAULT_DRIVER_ENV, "")
    if fault == "stop-ignored":
        return StopIgnored(driver)
    if fault:
        raise PreflightError(f"{FAULT_DRIVER_ENV}={fault!r}: the only faulty driver is 'stop-ignored'")
    return driver
