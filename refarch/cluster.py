"""One cluster's lifecycle: preflight, prepare (node image, wheelhouse),
deploy (terraform apply), configure (Ansible), destroy (terraform destroy,
sweep by run id, leak check).

A :class:`Cluster` is either new (``Cluster.create``) or attached to a kept
run by its id (``Cluster.attach``); every stage can run on its own, as
Terratest's stages and Molecule's steps do.  Phase timings (seconds)
accumulate in the run directory's ``run.json``.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from . import proc, progress
from .clouds.drivers import driver_for
from .clouds.protocol import CloudDriver, Prepared, RunContext
from .contract import Contract
from .errors import CloudGone, CommandError, LeakError, RefarchError, TeardownError
from .lifecycle import in_phase
from .paths import write_private
from .profile import Profile, load_profile
from .run import RunDir, new_run_id
from .tools import ansible
from .tools.terraform import Terraform


@dataclass
class Cluster:
    """A deployed (or to-be-deployed) cluster and its run directory."""

    profile: Profile
    rundir: RunDir
    contract: Contract | None = None
    image_tag: str | None = None
    wheelhouse: Path | None = None

    # Construction -----------------------------------------------------------
    @classmethod
    def create(cls, profile_name: str, overrides: dict | None = None, run_id: str | None = None,
               prefix: str = "hvd", loaded: Profile | None = None) -> Cluster:
        """Validate the profile and the tools, then make the run directory.
        Nothing is created in the cloud.  ``loaded``: the profile of
        ``profile_name`` and ``overrides`` already loaded and preflighted
        (the pytest plugin does both once, at configure time): neither is
        done again.

        Raises:
            ProfileError, PreflightError: bad input or a missing tool.
        """
        profile = loaded
        if profile is None:
            profile = load_profile(profile_name, overrides)
            preflight(profile)
        # Only now, with the input valid: leftovers of runs whose owner died.
        driver_for(profile).sweep_stale(out=lambda line: print(f"refarch: sweep: {line}", file=sys.stderr))
        rundir = RunDir.create(run_id or new_run_id(prefix))
        rundir.update_meta(profile=profile_name, overrides=overrides or {}, cloud=profile.cloud,
                           kept=False, phases={})
        return cls(profile, rundir)

    @classmethod
    def attach(cls, run_id: str, loaded: Profile | None = None) -> Cluster:
        """The kept cluster of ``run_id`` (its profile and contract re-read;
        ``loaded``: its profile already loaded, not read again).

        Raises:
            RefarchError: no such run directory.
        """
        rundir = RunDir.open(run_id)
        meta = rundir.read_meta()
        profile = loaded or load_profile(meta["profile"], meta.get("overrides"))
        contract = Contract.load(rundir.contract_file) if rundir.contract_file.exists() else None
        wh = Path(meta["wheelhouse"]) if meta.get("wheelhouse") else None
        return cls(profile, rundir, contract, meta.get("image"), wh)

    @property
    def run_id(self) -> str:
        return self.rundir.run_id

    @property
    def context(self) -> RunContext:
        """What the cloud driver is given of this run (read-only, made anew
        for each call so that it sees the contract and artefacts as they are
        now)."""
        return RunContext(self.run_id, self.profile, self.rundir, self.phase, self.contract, self.image_tag,
                          self.wheelhouse)

    @cached_property
    def terraform(self) -> Terraform:
        """The run's Terraform root module (made once per Cluster)."""
        return Terraform(self.rundir.terraform_dir, self.profile.cloud, self.rundir.logs / "terraform.log",
                         env=self.driver.tf_env(self.context))

    @property
    def prepared(self) -> bool:
        return self.driver.prepared(self.context)

    # Phase bookkeeping ------------------------------------------------------
    #: The log each phase writes (named in its progress lines).
    PHASE_LOGS = {"image": "image.log", "wheel": "wheel.log", "deploy": "terraform.log",
                  "configure": "ansible.log", "idempotence": "ansible-idempotence.log", "teardown": "terraform.log"}

    @contextmanager
    def phase(self, name: str):
        """Time a phase; its seconds are added to ``run.json`` ``phases``.
        While it runs, a progress line every 30 s names the phase, the
        previous run's duration and the log to follow."""
        start = time.monotonic()
        estimate = progress.previous_duration(self.rundir.path.parent, name, exclude=self.run_id)
        log = self.rundir.logs / self.PHASE_LOGS[name] if name in self.PHASE_LOGS else None
        try:
            with in_phase(name), progress.heartbeat(f"{name} of run {self.run_id}", estimate, log):
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
    @cached_property
    def driver(self) -> CloudDriver:
        """The cloud driver (:mod:`refarch.clouds.drivers`) of the profile's cloud."""
        return driver_for(self.profile)

    def prepare(self) -> Prepared:
        """What must exist before deploying: build artefacts on the local
        cloud (cached), quota preflight and baseline on OpenStack.  The
        cluster keeps the node image tag and the wheelhouse where the driver
        made them; returns what it made."""
        made = self.driver.prepare(self.context)
        if made.image_tag is not None:
            self.image_tag = made.image_tag
        if made.wheelhouse is not None:
            self.wheelhouse = made.wheelhouse
        return made

    def ca_files(self) -> list[str]:
        """Controller paths of the profile's extra CA certificates."""
        return self.profile.ca_files()

    def deploy(self) -> Contract:
        """``terraform apply`` the profile's root module; returns the contract.

        Raises:
            CommandError, PhaseTimeout: apply failed or ran too long (the
                caller's teardown still destroys what was made).
        """
        if not self.prepared:
            self.prepare()
        ssh = self.rundir.ssh_dir
        ssh.mkdir(exist_ok=True, mode=0o700)
        key = ssh / "id_ed25519"
        if not key.exists():
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"refarch-{self.run_id}",
                      "-f", str(key)], timeout_s=30)
        with self.phase("deploy"):
            tf = self.terraform
            tf.write_vars(self.driver.tf_vars(self.context, key, ssh / "known_hosts"))
            try:
                tf.apply(self.profile.timeouts_s.deploy)
            except CommandError as exc:
                faults = self.driver.apply_failure(self.context)
                if faults:
                    raise CommandError("; ".join(faults) + f" ({exc})") from exc
                raise
            outputs = tf.outputs()
            if "known_hosts" in outputs:
                # A module that makes host keys from inputs hands the lines
                # back; the contract names the file they go to.
                write_private(Path(outputs["ssh_known_hosts_file"]), outputs["known_hosts"])
            self.contract = Contract.from_outputs(outputs)
            self.contract.save(self.rundir.contract_file)
            self.contract.write_ssh_config(ssh / "config")
            # A node that did not boot is named with its cause here, not as
            # an SSH timeout later.
            self.driver.await_nodes(self.context, [n.name for n in self.contract.nodes],
                                    self.profile.timeouts_s.deploy)
        return self.contract

    def inventory_path(self) -> Path:
        return self.rundir.path / "inventory.yml"

    def write_inventory(self) -> Path:
        """The Ansible inventory from the contract plus the profile's inputs."""
        if self.contract is None:
            raise RefarchError(f"run {self.run_id} has no deployed cluster (no contract.json)")
        if not self.prepared:
            self.prepare()
        extra = {
            "training_user": self.profile.training_user.model_dump(),
            "cluster_ssh_key_dir": str(self.rundir.ssh_dir / "cluster"),
            "ca_certificates_files": self.ca_files(),
            "gpu_expected_count": self.profile.expect.gpus_per_node,
            "shared_storage_nfs_version": self.profile.shared_storage.nfs_version,
            **self.driver.ansible_vars(self.context),
        }
        return self.contract.write_inventory(self.inventory_path(), extra)

    def configure(self, log_name: str = "ansible.log", phase: str = "configure") -> ansible.PlaybookResult:
        """Run ``descriptors/ansible/site.yml`` against the cluster; its time
        counts towards ``phase`` and its output goes to ``logs/<log_name>``."""
        inventory = self.write_inventory()
        with self.phase(phase):
            return ansible.run_playbook(inventory, self.rundir.logs / log_name,
                                        timeout_s=self.profile.timeouts_s.configure)

    def destroy(self) -> dict:
        """``terraform destroy``, then a sweep by run id, then the leak check.

        Returns ``{"swept": {...}, "state": [...], "leaks": {...}}``, plus
        ``destroy_error`` (Terraform's error) when the destroy failed.  The
        sweep and the leak check run either way.  When the cloud the run
        was deployed on is gone with all it held (:class:`CloudGone`), the
        report is ``{"cloud_gone": why, "swept": {}, "state": [],
        "leaks": {}}`` and the run is marked destroyed.

        Raises:
            LeakError: Terraform state or labelled resources remain.
            TeardownError: ``terraform destroy`` failed, although the sweep
                left nothing (the message quotes Terraform's error).
        """
        log = self.rundir.logs / "teardown.log"
        report: dict = {}
        try:
            self.terraform  # noqa: B018 - its environment names the cloud the run lives on
        except CloudGone as exc:
            report = {"cloud_gone": str(exc), "swept": {}, "state": [], "leaks": {}}
            self.rundir.update_meta(kept=False, destroyed=True, teardown=report)
            return report
        with self.phase("teardown"):
            try:
                self.terraform.destroy(self.profile.timeouts_s.teardown)
            except RefarchError as exc:
                report["destroy_error"] = str(exc)
            report["swept"] = self.driver.sweep(self.context, log)
            state = self.terraform.state_list()
            if state:
                # The sweep removed the real resources; forget them in state.
                self.terraform.tf.execute_command("state", "rm", *state)
            report["state"] = self.terraform.state_list()
            report["leaks"] = self.driver.leaks(self.context)
            if not report["leaks"]:
                self.driver.finish(self.context)
        self.rundir.update_meta(kept=False, destroyed=True, teardown=report)
        if report["state"] or report["leaks"]:
            failed = f" (terraform destroy failed: {report['destroy_error']})" if "destroy_error" in report else ""
            raise LeakError(f"run {self.run_id} left resources behind: state={report['state']} "
                            f"{self.profile.cloud}={report['leaks']}{failed}")
        if "destroy_error" in report:
            raise TeardownError(f"run {self.run_id}: {report['destroy_error']} (the sweep by run id then removed "
                                "what it left: nothing is left)")
        return report


def preflight(profile: Profile) -> None:
    """Check tools, credentials and inputs for ``profile`` before anything
    is created.

    Raises:
        PreflightError: one line naming what is missing.
    """
    driver_for(profile).preflight(profile)
