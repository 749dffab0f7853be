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

