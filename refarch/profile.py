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

from pydantic import Field, ValidationError, field_validator, model_validator

from .errors import ProfileError
from .headroom import Headroom
from .overrides import check_property_override, nearest_key, profile_names, read_profile, set_path, with_base
from .properties import KNOWN
from .properties.availability import Availability
from .properties.base import Bounds, PropertySpec, Source
from .properties.base import Strict as _Strict
from .properties.communication import Communication
from .properties.convergence import Convergence
from .properties.exposure import Exposure
from .properties.scaling import ReferenceCurve, Smoke
from .stall import JobWatch

__all__ = ["Availability", "Bounds", "Communication", "Convergence", "Exposure", "Profile", "PropertySpec",
           "ReferenceCurve", "Smoke", "Source", "available_profiles", "load_profile"]


def _ipv4_network(value: str) -> ipaddress.IPv4Network:
    """``value`` as an IPv4 network; ValueError naming it when it is not."""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"malformed subnet {value!r}: {exc}") from None
    if net.version != 4:
        raise ValueError(f"subnet {value!r} is not IPv4")
    return net


class Flavor(_Strict):
    """Node size. ``memory_mb`` in MiB; ``name`` is the cloud flavor, if any."""

    memory_mb: int = Field(6144, ge=512)
    """Memory of a node in MiB: the local cloud's memory limit per node, the all-in-one's flavor RAM."""
    name: str | None = None
    """The cloud's flavor name, for the reader (the OpenStack module deploys ``openstack.flavor_name``)."""


class Nodes(_Strict):
    count: int = Field(ge=1, le=8)
    """Number of nodes of the cluster, N: the measurements run one rank per node, up to world size N."""
    flavor: Flavor = Flavor()
    """The size of every node."""


class Network(_Strict):
    subnet_pool: str
    """IPv4 range (CIDR) from which the local cloud reserves each run's free block of subnets."""
    subnet_prefix: int = Field(24, ge=17, le=28)
    """Prefix length of a run's cluster subnet; a run reserves a block twice its size: it and the probe subnet."""

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
    """Login name of the training user that Ansible creates on every node and that runs every job (never root)."""
    uid: int = Field(ge=1000, le=60000)
    """The training user's uid, the same on every node (the shared storage and MPI need one)."""

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
    """How the share is served: ``sshfs`` (the local cloud) or ``nfs`` (the OpenStack module)."""
    export: str = Field(pattern=r"^/")
    """Absolute path of the shared folder on the first node, which serves the share."""
    mount_point: str = Field(pattern=r"^/")
    """Absolute path where every node mounts the share."""
    size_gb: int = Field(1000, ge=0, le=16384)
    """Size in GB of the volume the OpenStack module makes for the share; 0: none, a folder on the first node's disk."""
    nfs_version: str = "4.2"
    """NFS version every node mounts the share with (``vers=``, Ansible's shared_storage role)."""
    required_mount_options: list[str] = ["rw"]
    """Options every node's mount of the share must show (e.g. rw, hard, vers=4.2)."""
    root_squash: bool = False
    """Whether root on a node must be unable to write to the share (NFS root_squash)."""


class HorovodBuild(_Strict):
    frameworks: list[str]
    """Frameworks Horovod must be built with, as ``horovodrun --check-build`` names them (e.g. TensorFlow)."""
    controllers: list[str]
    """Controllers Horovod must be built with, as ``horovodrun --check-build`` names them (e.g. Gloo, MPI)."""


class TimeSync(_Strict):
    """Clock expectations: chrony synchronised, |offset| under max_offset_ms."""

    service: Literal["chrony"] = "chrony"
    """The systemd unit that keeps the clock; the time check shows its state when chronyc fails."""
    max_offset_ms: float = Field(100, gt=0)
    """Largest clock offset in ms (chronyc tracking) a node may have."""


class Expect(_Strict):
    """What every node must have.  GPU fields matter when gpus_per_node > 0."""

    gpus_per_node: int = Field(0, ge=0, le=16)
    """GPUs nvidia-smi must show on every node (0: a CPU node); above 0 Ansible installs the GPU stack."""
    gpu_model: str | None = None
    """Text every GPU's name must contain (e.g. Tesla V100); None: the model is not checked."""
    min_driver_version: str | None = None
    """Oldest NVIDIA driver version every GPU may report; None: not checked."""
    min_cuda_version: str | None = None
    """Oldest CUDA toolkit version (nvcc --version) on every GPU node; None: not checked."""
    min_nccl_version: str | None = None
    """Oldest NCCL version (package libnccl2) on every GPU node; None: not checked."""
    sshd: dict[str, str | list[str]]
    """Effective sshd settings every node must have (``sshd -T`` key -> value, or a list of allowed values)."""
    horovod_build: HorovodBuild
    """What Horovod must be built with on every node."""
    time: TimeSync = TimeSync()
    """Clock synchronisation every node must have."""
    listening: list[str] = ["tcp/22"]
    """Sockets a node may listen on beyond loopback, as "tcp/22", "udp/123"."""
    exposure: Exposure = Exposure()
    """What a probe outside the cluster may find open on a node (the exposure properties)."""
    headroom: Headroom = Headroom()
    """What every node must have left before any job (refarch.headroom)."""


class Timeouts(_Strict):
    """Phase time limits in seconds."""

    image: int = Field(1200, ge=1)
    """Seconds to build the local cloud's node image."""
    wheel: int = Field(2400, ge=1)
    """Seconds to build the local cloud's Horovod wheelhouse."""
    deploy: int = Field(600, ge=1)
    """Seconds for ``terraform apply`` to deploy the cluster."""
    configure: int = Field(1500, ge=1)
    """Seconds for Ansible (descriptors/ansible/site.yml) to configure the nodes."""
    check: int = Field(300, ge=1)
    """Seconds each node or cluster check may run (pytest-timeout, the check's own call)."""
    smoke: int = Field(900, ge=1)
    """Seconds each horovodrun job (smoke, scaling, convergence, allreduce) may run."""
    teardown: int = Field(300, ge=1)
    """Seconds for ``terraform destroy`` to remove the cluster."""


class OpenStackSettings(_Strict):
    """Where and how to deploy on an OpenStack cloud.

    ``cloud`` names a clouds.yaml entry.  ``project_mode`` is ``shared`` (a
    CI project, isolation by run-id names and tags) or ``throwaway`` (an
    admin-capable ``cloud`` creates a project per run, grants ``ci_user``
    ``role`` on it and hands Terraform an application credential).
    """

    cloud: str
    """clouds.yaml entry the suite and Terraform (OS_CLOUD) use; admin-capable in throwaway mode."""
    project_mode: Literal["shared", "throwaway"] = "shared"
    """``shared``: one CI project, runs kept apart by run id names and tags; ``throwaway``: a project per run."""
    domain: str = "Default"
    """Keystone domain where a throwaway project is made and ``ci_user`` is looked up."""
    ci_user: str | None = None
    """The user Terraform runs as in a throwaway project (granted ``role`` on it); required in throwaway mode."""
    ci_cloud: str | None = None
    """clouds.yaml entry of ``ci_user`` that makes the throwaway project's application credential; None: the admin."""
    role: str = "member"
    """Keystone role granted to ``ci_user`` on a throwaway project."""
    image_name: str
    """Glance image every node boots (Debian 12)."""
    flavor_name: str
    """Nova flavor of every node; the quota preflight reads its vCPUs and RAM."""
    external_network: str
    """External (provider) network the router uplinks to and floating IPs come from."""
    admin_cidr: str
    """The only source range the security group lets reach SSH (tcp/22) from outside the cluster."""
    subnet_cidr: str = "10.42.0.0/24"
    """The cluster subnet (MPI, NCCL, Gloo and NFS traffic between the nodes)."""
    dns_nameservers: list[str] = []
    """DNS servers handed out on the cluster subnet (empty: the cloud's default)."""
    ssh_user: str = "debian"
    """Admin user of the image (passwordless sudo) that Ansible and the checks log in as."""
    volume_type: str | None = None
    """Cinder volume type of the share's volume (None: the cloud's default)."""
    availability_zone: str | None = None
    """Availability zone of the nodes and the share's volume (None: the cloud's default)."""
    guest_os: bool = True
    """False: the servers boot no guest OS (Nova's fake driver): after apply the suite waits for ACTIVE only, not
    for cloud-init's final message on the console log."""
    all_in_one: Literal["fake", "guests"] | None = None
    """The suite's own all-in-one serves this profile (refarch/clouds/aio): a kept one in this mode
    (``refarch aio up``) or one the run starts and stops; its clouds.yaml and, in guests mode, the host's
    address on its external network as ``admin_cidr`` are used.  None: a real cloud from clouds.yaml."""

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
    """The profile's name, named in messages (preflight, skipped properties, the gate)."""
    description: str = ""
    """One line on what the profile deploys, for the reader."""
    cloud: Literal["local", "openstack"]
    """The cloud driver that deploys the cluster: ``local`` (podman machines on this host) or ``openstack``."""
    nodes: Nodes
    """How many nodes, and their size."""
    network: Network
    """Where the local cloud takes each run's subnets from."""
    training_user: TrainingUser
    """The unprivileged user that trains on every node."""
    shared_storage: SharedStorage
    """The share every node mounts."""
    expect: Expect
    """What every node must have (sshd, Horovod build, clock, sockets, exposure, headroom, GPUs)."""
    smoke: Smoke
    """The synthetic benchmark of the smoke jobs and the scaling properties."""
    convergence: Convergence = Convergence()
    """The digits workload of the convergence properties."""
    communication: Communication = Communication()
    """The node pairs and message sizes of the communication property."""
    availability: Availability = Availability()
    """The failure modes and time limits of the availability properties (pytest --long-properties)."""
    properties: dict[str, dict[str, PropertySpec]]
    """Group -> name -> spec of each non-functional property; the property id is ``group.name``."""
    timeouts_s: Timeouts = Timeouts()
    """Time limit in seconds of each phase of a run."""
    job_watch: JobWatch = JobWatch()
    """How a training job is watched while it runs, and when it is stopped (refarch.stall)."""
    openstack: OpenStackSettings | None = None
    """Where and how to deploy on an OpenStack cloud (read by cloud ``openstack``)."""
    extra_ca_certificates: list[str] = ["/usr/local/share/ca-certificates/*.crt"]
    """Controller-side globs of extra CA certificates every node must trust (Ansible installs them)."""

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

