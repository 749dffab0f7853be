"""What the suite asks of a cloud driver: :class:`CloudDriver`, the methods
the cluster lifecycle (:mod:`refarch.cluster`), the pytest fixtures and
availability workloads (:mod:`refarch.pytest.availability`) and the fault cases call, and
:class:`Prepared`, what :meth:`CloudDriver.prepare` makes.

The drivers (:mod:`refarch.clouds.drivers`: the local cloud, OpenStack) do
not inherit from it; they match it method for method (the unit tests check
the parameter names), and :func:`refarch.clouds.drivers.driver_for` returns
one as a :class:`CloudDriver`.  Every method but the static ones takes the
:class:`RunContext` of the run it acts for (not the cluster: a driver reads
the run and returns what it made, the cluster keeps it); nodes are named as
in the contract (``node1``, ``node2``, ...), and the cloud's resources carry
the run id as their name's prefix (``<run id>-node2``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..contract import Contract
from ..profile import Profile
from ..run import RunDir

#: How a node fails in the availability measurements (profile
#: ``availability.failure_modes``): a clean shutdown, a hard power-off, and
#: a network partition (the node runs on, cut off).
FAILURE_MODES = ("stop", "kill", "partition")


@dataclass(frozen=True)
class Prepared:
    """What a driver's :meth:`CloudDriver.prepare` made for a run (a field
    is None where the cloud makes no such thing).

    ``image_tag`` and ``wheelhouse`` (local cloud): the node image's podman
    tag (``localhost/refarch-node:<12 hex>``) and the cached wheelhouse
    folder; the cluster keeps both (``Cluster.image_tag``,
    ``Cluster.wheelhouse``) and the run's ``run.json`` records them
    (``image``, ``wheelhouse``).  ``baseline`` (OpenStack): the run's
    ``baseline.json``, the project's resource ids before deploy
    ({kind: [id, ...]}), which the leak check compares against; ``project``:
    the throwaway project as ``run.json`` records it (``id``,
    ``credential_id``, ``clouds_yaml``, ``cloud``), None for the shared
    project.
    """

    image_tag: str | None = None
    wheelhouse: Path | None = None
    baseline: Path | None = None
    project: dict | None = None


@dataclass(frozen=True)
class RunContext:
    """What a driver is given of the run it acts for, read-only: the run id
    (``hvd-<who>-<6 chars>``), the loaded profile, the run directory
    (``runs/<run id>``: ``run.json``, logs, Terraform's folder), the phase
    timer (``with run.phase("image"):`` adds the seconds to ``run.json``),
    the contract once deployed, and the artefacts :meth:`CloudDriver.prepare`
    made earlier (local: the node image's tag and the wheelhouse folder).
    ``refarch.cluster.Cluster.context`` makes one for each call; a driver
    hands back what it makes (:class:`Prepared`) instead of writing into
    the cluster."""

    run_id: str
    profile: Profile
    rundir: RunDir
    phase: Callable[[str], AbstractContextManager]
    contract: Contract | None = None
    image_tag: str | None = None
    wheelhouse: Path | None = None


@runtime_checkable
class CloudDriver(Protocol):
    """One cloud, as the cluster lifecycle and the checks see it: preflight,
    build artefacts, Terraform's inputs and environment, Ansible's extra
    variables, node power and failures, the sweep by run id, the leak check
    and the end of the run."""

    #: The profile's ``cloud`` this driver serves ("local", "openstack").
    name: str

    # Before anything is created ----------------------------------------------
    @staticmethod
    def preflight(profile: Profile) -> None:
        """Check the tools, credentials and inputs ``profile`` needs on this
        cloud, before anything is created (``Cluster.create``,
        ``refarch preflight``).

        Raises:
            PreflightError: one line naming what is missing (a command, a
                clouds.yaml entry, credentials, an unreachable endpoint) or
                what the cloud cannot do (shared storage type, GPUs).
        """

    @staticmethod
    def sweep_stale(out: Callable[[str], object] = print) -> list[str]:
        """Remove what runs killed before their teardown left on this cloud
        (called by ``Cluster.create`` before the new run directory is made),
        writing one line per run to ``out``.

        Returns:
            The run ids swept (empty where the cloud leaves them to another
            sweeper, e.g. OpenStack's janitor by age).
        """

    def prepared(self, run: RunContext) -> bool:
        """True when :meth:`prepare` has already run for ``run`` (its
        artefacts are on the run, or its baseline in the run directory),
        so that ``Cluster.deploy`` skips it."""

    def prepare(self, run: RunContext) -> Prepared:
        """Make what must exist before ``terraform apply``, timed as phases
        of the run (``run.phase``): the node image and the wheelhouse
        (local cloud, both cached across runs; at most the profile's
        ``timeouts_s.image`` and ``timeouts_s.wheel`` seconds), or the
        throwaway project (if the profile asks for one), the quota check and
        the baseline (OpenStack).  Records in the run directory
        (``run.json``, ``baseline.json``) what later stages and an attached
        cluster read there; the caller (``Cluster.prepare``) keeps the
        returned artefacts on the run.

        Returns:
            :class:`Prepared` with the artefacts made.

        Raises:
            CommandError: a build command (debootstrap, podman) failed.
            PhaseTimeout: a build ran past its time limit.
            PreflightError: a quota is too small for the cluster (nothing
                was created but the throwaway project), or no connection.
            RefarchError: the throwaway project's user or role is unknown.
        """

    # Terraform and Ansible ----------------------------------------------------
    def tf_vars(self, run: RunContext, key: Path, known_hosts: Path) -> dict:
        """Terraform input variables of the cloud's root module
        (``descriptors/terraform/<cloud>/variables.tf``) for ``run``:
        a JSON-able dict, variable name -> value, with ``run_id``,
        ``node_count``, ``subnet_cidr``, ``ssh_public_key_file``
        (``<key>.pub``), ``ssh_private_key_file`` (``key``),
        ``ssh_known_hosts_file`` (``known_hosts``) and ``shared_storage``
        among them.  The local cloud reserves the run's subnet here (and
        records it in ``run.json``).

        Raises:
            RefarchError: the local subnet pool has no free block left.
        """

    def tf_env(self, run: RunContext) -> dict:
        """Extra environment for Terraform (name -> value; ``OS_CLOUD`` and
        ``OS_CLIENT_CONFIG_FILE`` on OpenStack, nothing on the local cloud)."""

    def await_nodes(self, run: RunContext, names: list[str], timeout_s: float) -> dict[str, float]:
        """Wait after ``terraform apply`` until nodes ``names`` have booted
        (OpenStack: ACTIVE and cloud-init finished on the console log; local:
        nothing to wait for, the containers run when apply returns); returns
        the seconds each took.

        Raises:
            RefarchError: ``node <name>: <cause>`` (a server's fault, a
                cloud-init failure, or the console's last line at the timeout).
        """

    def apply_failure(self, run: RunContext) -> list[str]:
        """After a failed ``terraform apply``: what the cloud says went wrong
        with the run's nodes, one line each (OpenStack: each server in ERROR
        with Nova's fault); empty when it says nothing.  Raises nothing."""

    def ansible_vars(self, run: RunContext) -> dict:
        """The cloud's extra inventory variables for ``site.yml``:
        ``{"horovod_wheelhouse_src": <controller path of the wheelhouse, or
        "" to build Horovod on the cluster>}``, read from the run's prepared
        artefacts (the cluster prepares first where :meth:`prepared` is
        False)."""

    # Nodes ---------------------------------------------------------------------
    def stop_node(self, run: RunContext, name: str) -> None:
        """Power node ``name`` off cleanly and return once it is off (local:
        ``podman stop``, 30 s to shut down, at most 90 s; OpenStack: SHUTOFF
        within 600 s).

        Raises:
            CommandError, PhaseTimeout: podman failed or ran too long (local).
            RefarchError: no such server, or not SHUTOFF in time (OpenStack).
        """

    def start_node(self, run: RunContext, name: str) -> None:
        """Power node ``name`` on again (same address, same disk, a fresh
        boot) and return once the cloud says it runs; errors as
        :meth:`stop_node`."""

    def fail_node(self, run: RunContext, name: str, mode: str) -> None:
        """Make node ``name`` fail as ``mode`` says
        (:data:`refarch.clouds.drivers.FAILURE_MODES`): ``stop`` as
        :meth:`stop_node`; ``kill`` as a power cut (the node stops at once
        and sends nothing more, not even the FINs of its sockets);
        ``partition`` the node runs on, cut off (no packet in or out, no
        reset).  :meth:`restore_node` undoes it.

        Raises:
            ValueError: ``mode`` is not a failure mode.
            CommandError, PhaseTimeout: a podman or nft command failed or
                ran too long (local; e.g. the node is not running).
            RefarchError: no such server, no port to cut off, or not in the
                state within 600 s (OpenStack).
        """

    def restore_node(self, run: RunContext, name: str, mode: str) -> None:
        """Undo :meth:`fail_node` with the same ``mode``: start the node
        again (``stop``, ``kill``: a fresh boot) or reconnect it
        (``partition``: its connections go on).  Restoring a partition that
        is not in effect does nothing.  Errors as :meth:`fail_node`, without
        the ValueError."""

    def node_state(self, run: RunContext, name: str) -> str:
        """Node ``name``'s power as the cloud reports it: "running",
        "stopped", "missing" (no such node) or the cloud's own state name in
        lower case (podman's, Nova's). Raises nothing for an unknown node."""

    # Diagnosis and surveys -----------------------------------------------------
    #: True where the cloud's nodes run on this machine (the local cloud):
    #: what the side-by-side comparison needs, as it fits both clusters
    #: into this machine's memory (``refarch compare``).
    on_this_machine: bool

    def node_console(self, run: RunContext, name: str) -> list[str] | None:
        """The command prefix that runs a command inside node ``name``
        without SSH or the cluster's network (local: ``podman exec <run
        id>-<name>``), so that an unreachable node's logs can still be read
        (``refarch.pytest.nodelogs``); None where the cloud has none
        (OpenStack). Raises nothing."""

    def survey_exposure(self, run: RunContext) -> dict:
        """Scan every node from an admin probe and an outside probe
        (``refarch.clouds.exposure``) and return {probe kind: ScanResult}
        (``admin``, ``outside``), each also carrying the packets the run's
        network policy dropped and those that reached each node; the probes
        are removed whatever happens.

        Raises:
            NotSupported: the cloud has no exposure probes (OpenStack).
            RefarchError: the cluster lacks what the survey needs (its probe
                subnet or network policy table): a defect of its deployment.
            CommandError, PhaseTimeout: a probe could not be made or run.
        """

    # Teardown ------------------------------------------------------------------
    def sweep(self, run: RunContext, log: Path) -> dict:
        """After ``terraform destroy``: delete every resource of the run
        found by its run id (name prefix or label), appending what was done
        to ``log``.

        Returns:
            What was removed, {kind: [name, ...]} (kinds such as
            ``containers``, ``networks``, ``volumes`` or ``servers``,
            ``ports``), kinds with nothing left out.

        Raises:
            CommandError, PhaseTimeout: a podman command failed or ran too
                long (local; OpenStack reports failed deletes in ``log``).
        """

    def leaks(self, run: RunContext) -> dict:
        """What is still left of the run after the sweep: {kind: [name,
        ...]}, empty when nothing leaked (local: the run's podman resources,
        nftables tables, bridge and rules of its subnet; OpenStack: every
        resource new since the baseline, as "name (id)")."""

    def finish(self, run: RunContext) -> None:
        """The end of a run that left nothing: release what outlives its
        resources (the local subnet reservation, the OpenStack throwaway
        project and its credential)."""
