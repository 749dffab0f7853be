"""A throwaway OpenStack project per run: made with a role for the CI user
and an application credential for Terraform, cleaned with openstacksdk's
``project_cleanup`` and deleted at the end of the run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import RefarchError
from ..paths import write_private
from .openstack import _describe


def cleanup_project(conn, dry_run: bool = True, created_before: dt.datetime | None = None) -> list[str]:
    """openstacksdk's ``project_cleanup`` over the connection's project (used
    for a throwaway project before it is deleted); returns the resources it
    listed, as ``"Type name (id)"``."""
    import queue

    status: queue.Queue = queue.Queue()
    filters = {"created_at": created_before.strftime("%Y-%m-%dT%H:%M:%S")} if created_before else None
    conn.project_cleanup(dry_run=dry_run, status_queue=status, filters=filters, wait_timeout=600)
    listed = []
    while not status.empty():
        res = status.get_nowait()
        listed.append(f"{type(res).__name__} {_describe(res)}")
    return listed


@dataclass
class ThrowawayProject:
    """A project made for one run: the CI user gets ``role`` on it and an
    application credential that Terraform uses (written as a clouds.yaml
    entry in the run directory, mode 0600)."""

    project_id: str
    name: str
    credential_id: str
    clouds_yaml: Path
    cloud_name: str

    @classmethod
    def create(cls, admin_conn, user_conn_factory: Callable[[str], Any], run_id: str, domain: str,
               ci_user: str, role: str, rundir: Path, auth_url: str, region: str | None = None) -> ThrowawayProject:
        """Create project ``run_id``, grant ``ci_user`` ``role`` on it, and make
        an application credential for it as that user.

        ``user_conn_factory(project_id)`` returns the CI user's connection
        scoped to the new project.

        Raises:
            RefarchError: the user or role is unknown.
        """
        ident = admin_conn.identity
        dom = ident.find_domain(domain, ignore_missing=False)
        project = ident.create_project(name=run_id, domain_id=dom.id,
                                       description=f"refarch throwaway project of run {run_id}",
                                       tags=["refarch", f"refarch-run:{run_id}"])
        user = ident.find_user(ci_user, domain_id=dom.id)
        role_obj = ident.find_role(role)
        if user is None or role_obj is None:
            ident.delete_project(project, ignore_missing=True)
            raise RefarchError(f"throwaway project: unknown {'user ' + ci_user if user is None else 'role ' + role}")
        ident.assign_project_role_to_user(project, user, role_obj)
        user_conn = user_conn_factory(project.id)
        cred = user_conn.identity.create_application_credential(
            user=user.id, name=f"{run_id}-terraform", description=f"Terraform of run {run_id}")
        cloud_name = f"refarch-{run_id}"
        entry = {"auth_type": "v3applicationcredential",
                 "auth": {"auth_url": auth_url, "application_credential_id": cred.id,
                          "application_credential_secret": cred.secret}}
        if region:
            entry["region_name"] = region
        clouds_yaml = rundir / "clouds.yaml"
        write_private(clouds_yaml, yaml.safe_dump({"clouds": {cloud_name: entry}}))
        return cls(project.id, run_id, cred.id, clouds_yaml, cloud_name)

    def delete(self, admin_conn, user_conn) -> list[str]:
        """Clean the project with ``project_cleanup``, delete the credential
        and the project; returns what the cleanup removed."""
        removed = cleanup_project(user_conn, dry_run=False)
        try:
            # As the admin: Keystone refuses a restricted application
            # credential that deletes itself.
            admin_conn.identity.delete_application_credential(
                user_conn.current_user_id, self.credential_id, ignore_missing=True)
        finally:
            admin_conn.identity.delete_project(self.project_id, ignore_missing=True)
            self.clouds_yaml.unlink(missing_ok=True)
        return removed
