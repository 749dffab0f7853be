"""What a start of the all-in-one makes in its new cloud for the profile
(flavor, image, external network, project and user), and the clouds.yaml
entries that reach it."""

from __future__ import annotations

import ipaddress

from ...profile import Profile

#: vCPUs and root disk (GB) of the profile's flavor.
FLAVOR_VCPUS = 1
FLAVOR_DISK_GB = 10


def clouds_entry(address: str, user: str, password: str, project: str) -> dict:
    """The clouds.yaml entry (a dict) of ``user`` in ``project`` on the
    all-in-one whose APIs listen on ``address``."""
    return {"auth": {"auth_url": f"http://{address}:5000/v3", "username": user, "password": password,
                     "project_name": project, "user_domain_name": "Default", "project_domain_name": "Default"},
            "region_name": "RegionOne", "interface": "public", "identity_api_version": 3,
            # One uwsgi worker per API on 2 busy cores: a connection reset
            # now and then (seen from keystone during a start) is retried.
            "connect_retries": 5}


def make_resources(conn, profile: Profile, user_password: str, external: str, guest=None) -> None:
    """What the profile expects of the cloud: its flavor (the profile's node
    memory, :data:`FLAVOR_VCPUS`, :data:`FLAVOR_DISK_GB`), an image (fake
    mode: a few bytes; guests mode: the guest image's kernel, ramdisk and
    qcow2 root), the external network with its floating-IP subnet
    ``external`` (gateway: the first address, held by nobody), and project
    ``demo`` with the profile's user holding its role; ``conn``: the
    cloud admin's openstacksdk Connection, ``guest``: the guest image's
    files (:func:`refarch.clouds.aio.guestimage.ensure_guest_image`) or
    None."""
    s = profile.openstack
    conn.compute.create_flavor(name=s.flavor_name, vcpus=FLAVOR_VCPUS, ram=profile.nodes.flavor.memory_mb,
                               disk=FLAVOR_DISK_GB)
    if guest is None:
        conn.image.create_image(name=s.image_name, data=b"refarch all-in-one: no guest boots from these bytes\n",
                                disk_format="raw", container_format="bare", visibility="public")
    else:
        from .guestimage import COMMAND_LINE

        kernel = conn.create_image(f"{s.image_name}-kernel", filename=str(guest.kernel), disk_format="aki",
                                   container_format="aki", visibility="public", wait=True)
        ramdisk = conn.create_image(f"{s.image_name}-ramdisk", filename=str(guest.initrd), disk_format="ari",
                                    container_format="ari", visibility="public", wait=True)
        conn.create_image(s.image_name, filename=str(guest.base), disk_format="qcow2", container_format="bare",
                          visibility="public", wait=True, kernel_id=kernel.id, ramdisk_id=ramdisk.id,
                          os_command_line=COMMAND_LINE, hw_rng_model="virtio")
    net = ipaddress.ip_network(external)
    hosts = list(net.hosts())
    public = conn.network.create_network(name=s.external_network, is_router_external=True,
                                         provider_network_type="flat", provider_physical_network="physnet1")
    conn.network.create_subnet(name=f"{s.external_network}-subnet", network_id=public.id, ip_version=4,
                               cidr=external, gateway_ip=str(hosts[0]), is_dhcp_enabled=False,
                               allocation_pools=[{"start": str(hosts[9]), "end": str(hosts[-5])}])
    project = conn.identity.create_project(name="demo", domain_id="default", description="the suite's project")
    user = conn.identity.create_user(name=s.ci_user or "demo", password=user_password, domain_id="default",
                                     default_project_id=project.id)
    conn.grant_role(conn.identity.find_role(s.role).id, user=user.id, project=project.id)
