"""One cluster's lifecycle: preflight, prepare (node image, wheelhouse),
deploy (terraform apply), configure (Ansible), destroy (terraform destroy,
sweep by run id, leak check).

A :class:`Cluster` is either new (``Cluster.create``) or attached to a kept
run by its id (``Cluster.attach``); every stage can run on its own, as
Terratest's stages and Molecule's steps do.  Phase timings (seconds)
accumulate in the run directory's ``run.json``.
"""

from __future__ import annotations

import glob
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import ansible, image, localcloud, proc, wheelhouse
from .contract import Contract
from .errors import LeakError, PreflightError, RefarchError
from .profile import Profile, load_profile
from .run import RunDir, new_run_id
from .terraform import Terraform


@dataclass
class Cluster:
    """A deployed (or to-be-deployed) cluster and its run directory."""

    profile: Profile
    rundir: RunDir
    contract: Contract | None = None
    image_tag: str | None = None
    wheelhouse: Path | None = None
    log: list[str] = field(default_factory=list)

    # Construction -----------------------------------------------------------
    @classmethod
    def create(cls, profile_name: str, overrides: dict | None = None, run_id: str | None = None,
               prefix: str = "hvd") -> Cluster:
        """Validate the profile and the tools, then make the run directory.
        Nothing is created in the cloud.

        Raises:
            ProfileError, PreflightError: bad input or a missing tool.
        """
        profile = load_profile(profile_name, overrides)
        preflight(profile)
        rundir = RunDir.create(run_id or new_run_id(prefix))
        rundir.update_meta(profile=profile_name, overrides=overrides or {}, cloud=profile.cloud,
                           kept=False, phases={})
        return cls(profile, rundir)

    @classmethod
    def attach(cls, run_id: str) -> Cluster:
        """The kept cluster of ``run_id`` (its profile and contract re-read).

        Raises:
            RefarchError: no such run directory.
        """
        rundir = RunDir.open(run_id)
        meta = rundir.read_meta()
        profile = load_profile(meta["profile"], meta.get("overrides"))
        contract = Contract.load(rundir.contract_file) if rundir.contract_file.exists() else None
        wh = Path(meta["wheelhouse"]) if meta.get("wheelhouse") else None
        return cls(profile, rundir, contract, meta.get("image"), wh)

    @property
    def run_id(self) -> str:
        return self.rundir.run_id

    @property
    def terraform(self) -> Terraform:
        return Terraform(self.rundir.terraform_dir, self.profile.cloud, self.rundir.logs / "terraform.log")

    # Phase bookkeeping ------------------------------------------------------
    @contextmanager
    def phase(self, name: str):
        """Time a phase; its seconds are added to ``run.json`` ``phases``."""
        start = time.monotonic()
        try:
            yield
        finally:
            elapsed = round(time.monotonic() - start, 1)
            phases = self.rundir.read_meta().get("phases", {})
            phases[name] = round(phases.get(name, 0) + elapsed, 1)
            self.rundir.update_meta(phases=phases)

    def phases(self) -> dict[str, float]:
        """Phase name -> seconds spent so far in this run."""
        return dict(self.rundir.read_meta().get("phases", {}))

    # Stages -----------------------------------------------------------------
    def prepare(self) -> None:
        """Build (or reuse from the cache) the node image and the wheelhouse."""
        t = self.profile.timeouts_s
        with self.phase("image"):
            self.image_tag = image.ensure_image(self.rundir.logs / "image.log", timeout=t.image)
        with self.phase("wheel"):
            self.wheelhouse = wheelhouse.ensure_wheelhouse(
                self.image_tag, self.rundir.logs / "wheel.log", timeout=t.wheel,
                ca_files=self.ca_files())
        self.rundir.update_meta(image=self.image_tag, wheelhouse=str(self.wheelhouse))

    def ca_files(self) -> list[str]:
        """Controller paths of the profile's extra CA certificates."""
        files: list[str] = []
        for pattern in self.profile.extra_ca_certificates:
            files += sorted(glob.glob(pattern))
        return files

    def deploy(self) -> Contract:
        """``terraform apply`` the profile's root module; returns the contract.

        Raises:
            CommandError, PhaseTimeout: apply failed or ran too long (the
                caller's teardown still destroys what was made).
        """
        if self.image_tag is None:
            self.prepare()
        ssh = self.rundir.ssh_dir
        ssh.mkdir(exist_ok=True, mode=0o700)
        key = ssh / "id_ed25519"
        if not key.exists():
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"refarch-{self.run_id}",
                      "-f", str(key)], timeout=30)
        with self.phase("deploy"):
            net = self.profile.network
            subnet = localcloud.pick_subnet(net.subnet_pool, net.subnet_prefix, localcloud.used_subnets())
            tf = self.terraform
            tf.write_vars({
                "run_id": self.run_id,
                "node_count": self.profile.nodes.count,
                "subnet_cidr": subnet,
                "image": self.image_tag,
                "flavor": {"memory_mb": self.profile.nodes.flavor.memory_mb},
                "ssh_public_key_file": str(key) + ".pub",
                "ssh_private_key_file": str(key),
                "ssh_known_hosts_file": str(ssh / "known_hosts"),
                "shared_storage": {"export": self.profile.shared_storage.export,
                                   "mount_point": self.profile.shared_storage.mount_point},
            })
            self.rundir.update_meta(subnet=subnet)
            tf.apply(self.profile.timeouts_s.deploy)
            self.contract = Contract.from_outputs(tf.outputs())
            self.contract.save(self.rundir.contract_file)
            self.contract.write_ssh_config(ssh / "config")
        return self.contract

    def inventory_path(self) -> Path:
        return self.rundir.path / "inventory.yml"

    def write_inventory(self) -> Path:
        """The Ansible inventory from the contract plus the profile's inputs."""
        if self.contract is None:
            raise RefarchError(f"run {self.run_id} has no deployed cluster (no contract.json)")
        if self.wheelhouse is None:
            self.prepare()
        extra = {
            "training_user": self.profile.training_user.model_dump(),
            "cluster_ssh_key_dir": str(self.rundir.ssh_dir / "cluster"),
            "ca_certificates_files": self.ca_files(),
            "horovod_wheelhouse_src": str(self.wheelhouse),
        }
        return self.contract.write_inventory(self.inventory_path(), extra)

    def configure(self, log_name: str = "ansible.log", phase: str = "configure") -> ansible.PlaybookResult:
        """Run ``descriptors/ansible/site.yml`` against the cluster; its time
        counts towards ``phase`` and its output goes to ``logs/<log_name>``."""
        inventory = self.write_inventory()
        with self.phase(phase):
            return ansible.run_playbook(inventory, self.rundir.logs / log_name,
                                        timeout=self.profile.timeouts_s.configure)

    def destroy(self) -> dict:
        """``terraform destroy``, then a sweep by run id, then the leak check.

        Returns ``{"swept": {...}, "state": [...], "leaks": {...}}``.

        Raises:
            LeakError: Terraform state or labelled resources remain.
        """
        log = self.rundir.logs / "teardown.log"
        report: dict = {}
        with self.phase("teardown"):
            try:
                self.terraform.destroy(self.profile.timeouts_s.teardown)
            except RefarchError as exc:
                report["destroy_error"] = str(exc)
            report["swept"] = {k: v for k, v in localcloud.sweep(self.run_id, log).items() if v}
            state = self.terraform.state_list()
            if state:
                # The sweep removed the real resources; forget them in state.
                for address in state:
                    self.terraform.tf.execute_command("state", "rm", address)
            report["state"] = self.terraform.state_list()
            report["leaks"] = localcloud.leaks(self.run_id)
        self.rundir.update_meta(kept=False, destroyed=True, teardown=report)
        if report["state"] or report["leaks"]:
            raise LeakError(f"run {self.run_id} left resources behind: state={report['state']} "
                            f"podman={report['leaks']}")
        return report


def preflight(profile: Profile) -> None:
    """Check tools and inputs for ``profile`` before anything is created.

    Raises:
        PreflightError: one line naming what is missing.
    """
    if profile.cloud == "local":
        localcloud.preflight_tools()
        ansible.preflight()
        if profile.shared_storage.type != "sshfs":
            raise PreflightError("the local cloud implements shared storage type sshfs only")
    else:
        raise PreflightError(f"cloud {profile.cloud!r} is not implemented yet (profile {profile.name})")
