#!/usr/bin/env python3
"""The all-in-one's service users and catalog (run by aio-firstboot):
aio-services.py ADDRESS ADMIN_PASSWORD SERVICE_PASSWORD.  Each service user
gets admin on project ``service``; each API public, internal and admin
endpoints on ADDRESS."""

import sys

import openstack

address, admin_password, service_password = sys.argv[1:4]
conn = openstack.connect(auth_url="http://127.0.0.1:5000/v3", username="admin", password=admin_password,
                         project_name="admin", user_domain_name="Default", project_domain_name="Default",
                         region_name="RegionOne", interface="internal")
identity = conn.identity
service = identity.create_project(name="service", domain_id="default", description="the services' users")
admin = identity.find_role("admin")
for name, kind, url in (("glance", "image", f"http://{address}:9292"),
                        ("placement", "placement", f"http://{address}:8778"),
                        ("nova", "compute", f"http://{address}:8774/v2.1"),
                        ("neutron", "network", f"http://{address}:9696")):
    user = identity.create_user(name=name, password=service_password, domain_id="default",
                                default_project_id=service.id)
    conn.grant_role(admin.id, user=user.id, project=service.id)
    entry = identity.create_service(name=name, type=kind, description=name)
    for interface in ("public", "internal", "admin"):
        identity.create_endpoint(service_id=entry.id, interface=interface, url=url, region_id="RegionOne")
print("services and endpoints made")
