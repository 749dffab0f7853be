"""The OpenStack cloud driver: a project reached through clouds.yaml
(descriptors/terraform/openstack), its preflight, quota check and baseline,
Terraform's inputs (with host keys made here) and environment (the pinned
providers from the suite's mirror), the node operations the availability
properties need, the janitor's sweep and the leak check.  The project
lifecycle itself is :mod:`refarch.clouds.openstack`."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from .. import proc
from ..errors import NotSupported, PreflightError
from ..profile import Profile
from ..tools import ansible
from .protocol import FAILURE_MODES, Prepared, RunContext


class OpenStackCloud:
    """An OpenStack project (descriptors/terraform/openstack), reached through
    clouds.yaml; shared CI project or a throwaway project per run.  A
    :class:`~refarch.clouds.protocol.CloudDriver`."""

    name = "openstack"
    on_this_machine = False

    def __init__(self):
        self._conn = None
        #: server name -> {port id: its security groups} while partitioned
        self._partitioned: dict[str, dict[str, list[str]]] = {}

    @staticmethod
    def preflight(profile: Profile) -> None:
        """Tools, clouds.yaml entry, credentials and endpoint: one line each."""
        from . import openstack as ostk

        ansible.preflight()
        if not shutil.which("terraform"):
            raise PreflightError("terraform (>= 1.5) is not on PATH")
        if profile.shared_storage.type != "nfs":
            raise PreflightError("the OpenStack target implements shared storage type nfs only")
        ostk.connect(profile.openstack.cloud)

    def conn(self, run: RunContext):
        from . import openstack as ostk

        if self._conn is None:
            if run.profile.openstack.all_in_one:
                from . import aio

                aio.serve_run(run.rundir.read_meta())
            self._conn = ostk.connect(run.profile.openstack.cloud)
        return self._conn

    def prepared(self, run: RunContext) -> bool:
        """See CloudDriver.prepared: the run has its baseline."""
        return (run.rundir.path / "baseline.json").exists()

    def prepare(self, run: RunContext) -> Prepared:
        """See CloudDriver.prepare: throwaway project (if asked for, recorded
        in ``run.json`` at once), quota preflight and baseline
        (``baseline.json``), before anything else is created."""
        from . import openstack as ostk

        settings = run.profile.openstack
        conn = self.conn(run)
        with run.phase("prepare"):
            if settings.all_in_one:
                from . import aio

                run.rundir.update_meta(all_in_one=aio.current().run_id)
            meta = run.rundir.read_meta()
            project = meta.get("project")
            if settings.project_mode == "throwaway" and "project" not in meta:
                from . import openstack_project as osproject

                def as_ci_user(pid: str):
                    if settings.ci_cloud:
                        return ostk.connect(settings.ci_cloud, project_id=pid)
                    return conn.connect_as_project(pid)

                tp = osproject.ThrowawayProject.create(
                    conn, as_ci_user, run.run_id, settings.domain,
                    settings.ci_user, settings.role, run.rundir.path, conn.auth["auth_url"])
                project = {"id": tp.project_id, "credential_id": tp.credential_id,
                           "clouds_yaml": str(tp.clouds_yaml), "cloud": tp.cloud_name}
                run.rundir.update_meta(project=project)
                self._conn = ostk.connect(tp.cloud_name, str(tp.clouds_yaml))
                conn = self._conn
            flavor = conn.compute.find_flavor(settings.flavor_name, ignore_missing=False)
            need = ostk.Need.for_cluster(run.profile.nodes.count, int(flavor.vcpus), int(flavor.ram),
                                         run.profile.shared_storage.size_gb)
            ostk.quota_preflight(conn, conn.current_project_id, need)
            path = run.rundir.path / "baseline.json"
            path.write_text(json.dumps(ostk.baseline(conn), indent=1))
        return Prepared(baseline=path, project=project)

    def tf_vars(self, run: RunContext, key: Path, known_hosts: Path) -> dict:
        """See CloudDriver.tf_vars."""
        s = run.profile.openstack
        storage = run.profile.shared_storage
        return {
            "run_id": run.run_id, "node_count": run.profile.nodes.count,
            "image_name": s.image_name, "flavor_name": s.flavor_name,
            "external_network_name": s.external_network, "admin_cidr": s.admin_cidr,
            "subnet_cidr": s.subnet_cidr, "dns_nameservers": s.dns_nameservers, "ssh_user": s.ssh_user,
            "ssh_public_key_file": f"{key}.pub", "ssh_private_key_file": str(key),
            "ssh_known_hosts_file": str(known_hosts), "ssh_host_keys_dir": str(host_keys(run, known_hosts.parent)),
            "volume_type": s.volume_type,
            "availability_zone": s.availability_zone,
            "shared_storage": {"export": storage.export, "mount_point": storage.mount_point,
                               "size_gb": storage.size_gb},
        }

    def await_nodes(self, run: RunContext, names: list[str], timeout_s: float) -> dict[str, float]:
        """See CloudDriver.await_nodes: Nova's fault for a server in ERROR,
        then cloud-init's final message on each console log."""
        from . import openstack_nodes as osnodes

        took = osnodes.await_boot(self.conn(run), {n: f"{run.run_id}-{n}" for n in names}, timeout_s,
                                  guest_os=run.profile.openstack.guest_os)
        if run.profile.openstack.all_in_one == "guests" and run.contract and run.contract.ssh_bastion:
            # Before the first packet to the floating IP (Ansible's SSH).
            from . import aio
            from .aio.network import check_route

            check_route(aio.current(), run.contract.ssh_bastion["address"])
        return took

    def apply_failure(self, run: RunContext) -> list[str]:
        """See CloudDriver.apply_failure: the run's servers in ERROR with
        Nova's fault (Terraform's provider says only "unexpected state
        'ERROR'")."""
        from . import openstack_nodes as osnodes

        try:
            return osnodes.server_faults(self.conn(run), run.run_id)
        except Exception as exc:  # noqa: BLE001 - a diagnosis must not hide the failure
            return [f"(the servers' faults could not be read: {exc})"]

    def tf_env(self, run: RunContext) -> dict:
        """See CloudDriver.tf_env: the throwaway project's clouds.yaml entry,
        or the profile's cloud, and a CLI config that installs the pinned
        providers from the suite's mirror (built here if missing)."""
        from ..tools import providers

        meta = run.rundir.read_meta()
        project = meta.get("project")
        if run.profile.openstack.all_in_one and not project:
            from . import aio

            aio.serve_run(meta)  # before anything is built for a cloud that is gone
        mirror = providers.ensure_providers(run.rundir.logs / "providers.log")
        env = {"TF_CLI_CONFIG_FILE": str(providers.write_cli_config(run.rundir.path / "terraform.tfrc", mirror))}
        if project:
            return {**env, "OS_CLOUD": project["cloud"], "OS_CLIENT_CONFIG_FILE": project["clouds_yaml"]}
        return {**env, "OS_CLOUD": run.profile.openstack.cloud}

    def ansible_vars(self, run: RunContext) -> dict:
        """See CloudDriver.ansible_vars: no wheelhouse (GPU builds of
        Horovod need CUDA and NCCL: built on the cluster itself), but on the
        all-in-one's guests the suite's wheelhouse, which their image carries
        on the share already (they reach no package index)."""
        if run.profile.openstack.all_in_one == "guests":
            from ..paths import cache_dir
            from .wheelhouse import wheelhouse_key

            return {"horovod_wheelhouse_src": str(cache_dir() / "wheelhouse" / wheelhouse_key())}
        return {"horovod_wheelhouse_src": ""}

    def stop_node(self, run: RunContext, name: str) -> None:
        """Stop the node's server (SHUTOFF)."""
        from . import openstack_nodes as osnodes

        osnodes.set_power(self.conn(run), f"{run.run_id}-{name}", on=False)

    def start_node(self, run: RunContext, name: str) -> None:
        """Start the node's server again (ACTIVE)."""
        from . import openstack_nodes as osnodes

        osnodes.set_power(self.conn(run), f"{run.run_id}-{name}", on=True)

    def fail_node(self, run: RunContext, name: str, mode: str) -> None:
        """Make node ``name`` fail as ``mode`` says: ``stop`` as
        :meth:`stop_node`; ``kill`` frozen at once
        (:func:`refarch.clouds.openstack_nodes.power_cut`); ``partition`` its ports get a
        security group without rules (:func:`refarch.clouds.openstack_nodes.partition`)."""
        from . import openstack_nodes as osnodes

        server = f"{run.run_id}-{name}"
        if mode == "stop":
            self.stop_node(run, name)
        elif mode == "kill":
            osnodes.power_cut(self.conn(run), server)
        elif mode == "partition":
            self._partitioned[server] = osnodes.partition(self.conn(run), server, run.run_id)
        else:
            raise ValueError(f"failure mode {mode!r}: not one of {', '.join(FAILURE_MODES)}")

    def restore_node(self, run: RunContext, name: str, mode: str) -> None:
        """Undo :meth:`fail_node` (start, boot afresh, or the ports' own
        security groups back)."""
        from . import openstack_nodes as osnodes

        server = f"{run.run_id}-{name}"
        if mode == "stop":
            self.start_node(run, name)
        elif mode == "kill":
            osnodes.power_restored(self.conn(run), server)
        elif mode == "partition":
            osnodes.heal(self.conn(run), self._partitioned.pop(server, {}))

    def node_state(self, run: RunContext, name: str) -> str:
        """"running" (ACTIVE), "stopped" (SHUTOFF, PAUSED) or Nova's status
        in lower case (error, ..., missing)."""
        from . import openstack_nodes as osnodes

        return osnodes.node_state(self.conn(run), f"{run.run_id}-{name}")

    def node_console(self, run: RunContext, name: str) -> list[str] | None:
        """See CloudDriver.node_console: none (the server's console log is
        not a shell)."""
        return None

    def survey_exposure(self, run: RunContext) -> dict:
        """See CloudDriver.survey_exposure: on the all-in-one's guests, the
        probes stand on its external network (refarch.clouds.aio.probes)
        and reach each node through its floating IP and, through the run's
        router, at its fixed address; the security groups judge them.  A
        probe's namespace has no link but its macvlan on the external
        network and no route but the subnet's and the cluster's: no packet
        of it can take the host's default route.

        Raises:
            NotSupported: any other OpenStack cloud (no probe of the suite
                stands outside it).
        """
        if run.profile.openstack.all_in_one != "guests":
            raise NotSupported("the exposure probes stand on the all-in-one's external network; on another "
                               "OpenStack cloud the suite has no host outside the cluster to probe from")
        from . import aio
        from .aio import probes

        conn, contract = self.conn(run), run.contract
        allin = aio.current()
        router = conn.network.find_router(f"{run.run_id}-router", ignore_missing=False)
        gateway = router.external_gateway_info["external_fixed_ips"][0]["ip_address"]
        targets = []
        for node in contract.nodes:
            server = conn.compute.find_server(f"{run.run_id}-{node.name}", ignore_missing=False)
            port = next(p for p in conn.network.ports(device_id=server.id)
                        if any(ip["ip_address"] == node.address for ip in p.fixed_ips))
            floating = next((f.floating_ip_address for f in conn.network.ips(port_id=port.id)), None)
            targets.append(probes.Target(node.name, node.address, floating, probes.tap_name(port.id)))
        return probes.survey(run.run_id, allin.container, allin.host_link, probes.plan(
            run.run_id, allin.external_cidr, gateway), targets, contract.cluster_cidr, contract.ssh_options(),
            contract.ssh_user)

    def sweep(self, run: RunContext, log: Path) -> dict:
        """See CloudDriver.sweep: the janitor on the run id, whatever the age."""
        from . import openstack as ostk

        report = ostk.janitor(self.conn(run), run.run_id, dt.timedelta(0), dry_run=False)
        if run.profile.openstack.all_in_one == "guests":
            from . import exposure

            probes = exposure.remove_probes(run.run_id)
            report.deleted.extend(("netns", ns) for ns in probes)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"deleted": report.deleted, "failed": report.failed, "waits": report.waits}) + "\n")
        swept: dict[str, list[str]] = {}
        for kind, name in report.deleted:
            swept.setdefault(kind, []).append(name)
        return swept

    def leaks(self, run: RunContext) -> dict:
        """See CloudDriver.leaks: what is new since the baseline."""
        from . import openstack as ostk

        path = run.rundir.path / "baseline.json"
        before = json.loads(path.read_text()) if path.exists() else {}
        return ostk.leaks(self.conn(run), before)

    @staticmethod
    def sweep_stale(out=print) -> list[str]:
        """Runs killed before their teardown are the janitor's (by age)."""
        return []

    def finish(self, run: RunContext) -> None:
        """Delete the throwaway project (after its resources)."""
        from . import openstack as ostk

        project = run.rundir.read_meta().get("project")
        if not project:
            return
        admin = ostk.connect(run.profile.openstack.cloud)
        from . import openstack_project as osproject

        tp = osproject.ThrowawayProject(project["id"], run.run_id, project["credential_id"],
                                   Path(project["clouds_yaml"]), project["cloud"])
        tp.delete(admin, self.conn(run))


def host_keys(run: RunContext, ssh_dir: Path) -> Path:
    """One ed25519 host key pair per node, ``<ssh_dir>/hostkeys/<hostname>``
    and ``.pub`` (made once per run with ssh-keygen): the OpenStack module
    injects them by cloud-init and writes known_hosts from them, so SSH is
    strict from the first connection.  Returns the folder.

    Raises:
        CommandError: ssh-keygen failed.
    """
    folder = ssh_dir / "hostkeys"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for i in range(run.profile.nodes.count):
        key = folder / f"node{i + 1}"
        if not key.exists():
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{run.run_id}-node{i + 1}",
                      "-f", str(key)], timeout_s=30)
    return folder
