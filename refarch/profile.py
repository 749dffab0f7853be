"""Profiles: one YAML file per target that carries every expectation.

A profile names the cloud, node count and flavor, what each node must have,
the workloads and the non-functional properties with their references;
tests read expectations from it and hard-code none.  References carry
tolerances (after ReFrame): a target, lower and/or upper bounds, an optional
warning band, and their source.
"""

from __future__ import annotations

import glob
import ipaddress
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ProfileError
from .headroom import Headroom
from .overrides import check_property_override, nearest_key, profile_names, read_profile, set_path, with_base
from .stall import JobWatch


def _ipv4_network(value: str) -> ipaddress.IPv4Network:
    """``value`` as an IPv4 network; ValueError naming it when it is not."""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"malformed subnet {value!r}: {exc}") from None
    if net.version != 4:
        raise ValueError(f"subnet {value!r} is not IPv4")
    return net


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Flavor(_Strict):
    """Node size. ``memory_mb`` in MiB; ``name`` is the cloud flavor, if any."""

    memory_mb: int = Field(6144, ge=512)
    name: str | None = None


class Nodes(_Strict):
    count: int = Field(ge=1, le=8)
    flavor: Flavor = Flavor()


class Network(_Strict):
    subnet_pool: str
    subnet_prefix: int = Field(24, ge=17, le=28)

    @field_validator("subnet_pool")
    @classmethod
    def _pool_is_cidr(cls, value: str) -> str:
        _ipv4_network(value)
        return value

    @model_validator(mode="after")
    def _prefix_fits(self) -> Network:
        # A run takes a block of two: its subnet and the exposure probes' one.
        if ipaddress.ip_network(self.subnet_pool).prefixlen > self.subnet_prefix - 1:
            raise ValueError(f"the pool {self.subnet_pool} cannot hold a /{self.subnet_prefix - 1} "
                             f"(a run's /{self.subnet_prefix} and its probe subnet)")
        return self


class TrainingUser(_Strict):
    """The unprivileged user that trains (the architecture never trains as root)."""

    name: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,30}$")
    uid: int = Field(ge=1000, le=60000)

    @field_validator("name")
    @classmethod
    def _not_root(cls, value: str) -> str:
        if value == "root":
            raise ValueError("the training user must not be root (the architecture trains as an unprivileged user)")
        return value


class SharedStorage(_Strict):
    """``size_gb`` applies where the cloud makes a volume for the share; 0
    makes none (an OpenStack without Cinder): the share is then a folder on
    the first node's own disk."""

    type: Literal["sshfs", "nfs"]
    export: str = Field(pattern=r"^/")
    mount_point: str = Field(pattern=r"^/")
    size_gb: int = Field(1000, ge=0, le=16384)
    nfs_version: str = "4.2"
    #: Options every node's mount must show (e.g. rw, hard, vers=4.2).
    required_mount_options: list[str] = ["rw"]
    #: Whether root on a client must be unable to write (NFS root_squash).
    root_squash: bool = False


class HorovodBuild(_Strict):
    frameworks: list[str]
    controllers: list[str]


class TimeSync(_Strict):
    """Clock expectations: chrony synchronised, |offset| under max_offset_ms."""

    service: Literal["chrony"] = "chrony"
    max_offset_ms: float = Field(100, gt=0)


class Exposure(_Strict):
    """What a probe outside the cluster may find open on a node ("tcp/22"):
    from the admin range, and from anywhere else."""

    admin: list[str] = ["tcp/22"]
    outside: list[str] = []


class Expect(_Strict):
    """What every node must have.  GPU fields matter when gpus_per_node > 0."""

    gpus_per_node: int = Field(0, ge=0, le=16)
    gpu_model: str | None = None
    min_driver_version: str | None = None
    min_cuda_version: str | None = None
    min_nccl_version: str | None = None
    sshd: dict[str, str | list[str]]
    horovod_build: HorovodBuild
    time: TimeSync = TimeSync()
    #: Sockets a node may listen on beyond loopback, as "tcp/22", "udp/123".
    listening: list[str] = ["tcp/22"]
    exposure: Exposure = Exposure()
    headroom: Headroom = Headroom()


class ReferenceCurve(_Strict):
    """Published images/sec per world size, drawn beside the measured curve
    on an axis of its own (other hardware); ``source`` says where from."""

    images_per_sec: dict[int, float]
    source: str


class Smoke(_Strict):
    """The synthetic benchmark.  ``batch_size`` (images per rank per step)
    is the one the smoke checks and the efficiency property use;
    ``batch_sizes`` adds others to the scaling table; ``world_sizes`` lists
    the world sizes measured (default 1..N, one rank per node)."""

    model: str
    image_size: int = Field(ge=32, le=512)
    batch_size: int = Field(ge=1)
    batch_sizes: list[int] = []
    world_sizes: list[int] = []
    warmup_steps: int = Field(ge=0)
    #: Timed steps per job: their per-step figures give each throughput's
    #: median and 95 % interval (refarch.judge.figures, at least 6 steps).
    steps: int = Field(ge=6)
    intra_op_threads: int = Field(1, ge=1)
    start_timeout_s: int = Field(120, ge=10)
    #: Rounds in which every job at np > 1 also times rank 0 training alone
    #: (its np=1 baseline, measured beside its own steps: a machine whose
    #: speed changes shows it in both); 0: the np=1 job is the baseline.
    baseline_rounds: int = Field(3, ge=0)
    #: Widest efficiency interval (95 %, relative to its median) that is
    #: still judged; wider is an error (refarch.judge.figures.problems).
    max_relative_width: float = Field(0.5, gt=0)
    #: Largest relative difference between np=1 on its own and np=1 in the
    #: rounds before the run's efficiency is an error.
    max_baseline_drift: float = Field(0.25, gt=0)
    reference_curve: ReferenceCurve | None = None


class Convergence(_Strict):
    """The digits convergence workload (``digits_convergence.py``): the same
    global batch (images per step over all ranks) and learning rate at every
    world size."""

    epochs: int = Field(15, ge=1)
    global_batch_size: int = Field(32, ge=8)
    learning_rate: float = Field(0.1, gt=0)
    test_fraction: float = Field(0.2, gt=0, lt=1)
    seed: int = 42


class Communication(_Strict):
    """The communication measurement between pairs of nodes (``pairs``:
    every pair, N(N-1)/2 of them, or a ring, each node and the next: N):
    raw TCP for ``tcp_seconds`` (iperf3), then Horovod allreduce at each
    size in ``sizes_mib`` (MiB), ``warmup`` untimed and ``iterations`` timed."""

    pairs: Literal["all", "ring"] = "all"
    tcp_seconds: int = Field(3, ge=1, le=60)
    sizes_mib: list[float] = Field([1, 16, 64], min_length=1)
    warmup: int = Field(2, ge=0)
    iterations: int = Field(5, ge=1)


class Availability(_Strict):
    """The availability measurements (tox -e availability): the node fails
    in each of ``failure_modes`` in turn (one elastic job each); the elastic
    job commits every ``commit_every`` steps and sleeps ``step_sleep_s`` per
    step; time limits in seconds for a node to be healthy after its start,
    for the job to reach each expected world size, and for the whole job."""

    failure_modes: list[Literal["stop", "kill", "partition"]] = Field(
        ["stop", "kill", "partition"], min_length=1,
        description="how the node fails in the elastic job (refarch.clouds.drivers.FAILURE_MODES): each mode listed "
                    "is measured by its own recovery and rejoin properties")
    commit_every: int = Field(10, ge=1)
    step_sleep_s: float = Field(0.1, ge=0)
    restart_timeout_s: int = Field(300, ge=10)
    step_timeout_s: int = Field(240, ge=10)
    job_timeout_s: int = Field(900, ge=60)


class Bounds(_Strict):
    """A reference with tolerances (after ReFrame's references): the run
    fails below ``lower`` or above ``upper`` and warns below ``warn_below``
    or above ``warn_above``; ``target`` is what the architecture reaches."""

    target: float | None = None
    lower: float | None = None
    upper: float | None = None
    warn_below: float | None = None
    warn_above: float | None = None

    @model_validator(mode="after")
    def _bounded(self) -> Bounds:
        if self.lower is None and self.upper is None:
            raise ValueError("a reference needs a lower or an upper bound")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower {self.lower} is above upper {self.upper}")
        return self


class Source(_Strict):
    """Where a reference comes from: text (a paper, a measurement on a named
    machine) and a URL where one exists."""

    text: str = Field(min_length=3)
    url: str | None = Field(None, pattern=r"^https?://")


class PropertySpec(_Strict):
    """One non-functional property of the profile (ids and units:
    :data:`refarch.judge.properties.KNOWN`).  ``skip`` is the profile's reason
    why the property cannot run on it (reported as skipped, never absent)."""

    unit: str
    reference: Bounds
    source: Source
    skip: str | None = None


class Timeouts(_Strict):
    """Phase time limits in seconds."""

    image: int = Field(1200, ge=1)
    wheel: int = Field(2400, ge=1)
    deploy: int = Field(600, ge=1)
    configure: int = Field(1500, ge=1)
    check: int = Field(300, ge=1)
    smoke: int = Field(900, ge=1)
    teardown: int = Field(300, ge=1)


class OpenStackSettings(_Strict):
    """Where and how to deploy on an OpenStack cloud.

    ``cloud`` names a clouds.yaml entry.  ``project_mode`` is ``shared`` (a
    CI project, isolation by run-id names and tags) or ``throwaway`` (an
    admin-capable ``cloud`` creates a project per run, grants ``ci_user``
    ``role`` on it and hands Terraform an application credential).
    """

    cloud: str
    project_mode: Literal["shared", "throwaway"] = "shared"
    domain: str = "Default"
    ci_user: str | None = None
    #: clouds.yaml entry of ``ci_user`` (its own credentials): the throwaway
    #: project's application credential is made as that user, since
    #: Keystone lets only a user make their own; None: the admin entry acts
    #: in the new project (where the cloud's policy allows it).
    ci_cloud: str | None = None
    role: str = "member"
    image_name: str
    flavor_name: str
    external_network: str
    admin_cidr: str
    subnet_cidr: str = "10.42.0.0/24"
    dns_nameservers: list[str] = []
    ssh_user: str = "debian"
    volume_type: str | None = None
    availability_zone: str | None = None

    @field_validator("admin_cidr", "subnet_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        if _ipv4_network(value).prefixlen == 0:
            raise ValueError(f"{value} is the whole internet; name the admins' range")
        return value

    @model_validator(mode="after")
    def _throwaway_needs_user(self) -> OpenStackSettings:
        if self.project_mode == "throwaway" and not self.ci_user:
            raise ValueError("project_mode throwaway needs ci_user (the user Terraform runs as)")
        return self


class Profile(_Strict):
    """A validated profile. Build one with :func:`load_profile`."""

    name: str
    description: str = ""
    cloud: Literal["local", "openstack"]
    nodes: Nodes
    network: Network
    training_user: TrainingUser
    shared_storage: SharedStorage
    expect: Expect
    smoke: Smoke
    convergence: Convergence = Convergence()
    communication: Communication = Communication()
    availability: Availability = Availability()
    #: group -> name -> spec; the property id is ``group.name``.
    properties: dict[str, dict[str, PropertySpec]]
    timeouts_s: Timeouts = Timeouts()
    job_watch: JobWatch = JobWatch()
    openstack: OpenStackSettings | None = None
    #: Controller-side globs of extra CA certificates every node must trust.
    extra_ca_certificates: list[str] = ["/usr/local/share/ca-certificates/*.crt"]

    def ca_files(self) -> list[str]:
        """Controller paths of :attr:`extra_ca_certificates` as this machine
        has them (each glob expanded, sorted; a glob matching nothing adds
        nothing)."""
        return [f for pattern in self.extra_ca_certificates for f in sorted(glob.glob(pattern))]

    @model_validator(mode="after")
    def _world_sizes_fit(self) -> Profile:
        too_big = [w for w in self.smoke.world_sizes if not 1 <= w <= self.nodes.count]
        if too_big:
            raise ValueError(f"smoke.world_sizes {too_big} are not between 1 and nodes.count {self.nodes.count}")
        return self

    def scaling_points(self) -> list[tuple[int, int]]:
        """(batch size, world size) pairs the scaling table measures: every
        batch size at every world size (1..N unless ``smoke.world_sizes``)."""
        sizes = sorted(set(self.smoke.world_sizes or range(1, self.nodes.count + 1)) | {1, self.nodes.count})
        batches = [self.smoke.batch_size] + [b for b in self.smoke.batch_sizes if b != self.smoke.batch_size]
        return [(b, w) for b in batches for w in sizes]

    @model_validator(mode="after")
    def _known_properties(self) -> Profile:
        from .judge.properties import KNOWN

        for prop_id, spec in self.property_specs().items():
            if prop_id not in KNOWN:
                raise ValueError(f"properties.{prop_id}: unknown property; known: {', '.join(KNOWN)}")
            if spec.unit != KNOWN[prop_id][0]:
                raise ValueError(f"properties.{prop_id}: unit {spec.unit!r}, measured in {KNOWN[prop_id][0]!r}")
        return self

    def property_specs(self) -> dict[str, PropertySpec]:
        """{property id: spec} in the profile's order."""
        return {f"{group}.{name}": spec for group, specs in self.properties.items() for name, spec in specs.items()}


def available_profiles() -> list[str]:
    """Names of the profiles shipped in ``descriptors/profiles``."""
    return profile_names()


def load_profile(name_or_path: str, overrides: dict[str, Any] | None = None) -> Profile:
    """Load and validate a profile by name (``descriptors/profiles/<name>.yml``)
    or by path, laid over the profile it ``extends`` (by name), applying
    dotted-key ``overrides`` such as ``{"nodes.count": 3}``.

    Raises:
        ProfileError: unknown profile, unreadable YAML, an ``extends`` cycle or
            a value that fails validation (one line naming the field).
    """
    data = with_base(read_profile(name_or_path), read_profile)
    for key, value in (overrides or {}).items():
        check_property_override(data, key)
        set_path(data, key, value)
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        hint = ""
        if first["type"] == "extra_forbidden":
            near = nearest_key(Profile, first["loc"])
            hint = f"; did you mean {near}?" if near else ""
        raise ProfileError(f"profile {data.get('name', name_or_path)}: {where}: {first['msg']}{hint}") from None

