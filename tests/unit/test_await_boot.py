"""The OpenStack boot wait (refarch.clouds.openstack_nodes.await_boot) on
recorded shapes of Nova's answers: a server in ERROR is named with its
fault before any SSH, a cloud-init failure and a fall-back to
DataSourceNone with the console's lines, a slow guest with its last line."""

from types import SimpleNamespace

import pytest

from refarch.clouds.openstack_nodes import await_boot
from refarch.errors import RefarchError

FINISHED = ("[  130.630314] cloud-init[535]: Cloud-init v. 22.4.2 finished at Mon, 07 Dec 2026 04:10:01 +0000. Datasource "
            "DataSourceConfigDrive [net,ver=2][source=/dev/sr0].  Up 151.07 seconds")


class Compute:
    def __init__(self, servers):
        self.recorded = servers

    def servers(self):
        return [SimpleNamespace(name=n, id=n, status=v[0]) for n, v in self.recorded.items()]

    def find_server(self, name, ignore_missing=True):
        return name if name in self.recorded else None

    def get_server(self, name):
        status, fault, _ = self.recorded[name]
        return SimpleNamespace(name=name, status=status, fault=fault)

    def get_server_console_output(self, server):
        return {"output": self.recorded[server.name][2]}


def conn(**servers):
    return SimpleNamespace(compute=Compute(servers))


def clock():
    ticks = iter(range(0, 10_000, 5))
    return lambda: next(ticks)


def test_every_node_booted_returns_the_seconds():
    c = conn(**{"r-node1": ("ACTIVE", None, f"boot\n{FINISHED}\n"), "r-node2": ("ACTIVE", None, FINISHED)})
    took = await_boot(c, {"r-node1": "r-node1", "r-node2": "r-node2"}, 60, clock=clock(), sleep=lambda s: None)
    assert set(took) == {"r-node1", "r-node2"}


def test_a_server_in_error_is_named_with_novas_fault():
    fault = {"code": 500, "message": "No valid host was found. There are not enough hosts available."}
    c = conn(**{"r-node1": ("ACTIVE", None, FINISHED), "r-node2": ("ERROR", fault, "")})
    with pytest.raises(RefarchError, match=r"^r-node2: server in ERROR: No valid host was found\..* \(code 500\)$"):
        await_boot(c, {"r-node1": "r-node1", "r-node2": "r-node2"}, 60, clock=clock(), sleep=lambda s: None)


def test_failed_user_data_is_named_from_the_console_log():
    # As node2's console showed it on the all-in-one (its runcmd exited 3).
    console = ("[  195.797883] cloud-init[536]: 2026-12-07 14:05:15,470 - cc_scripts_user.py[WARNING]: Failed to run "
               "module scripts-user (scripts in /var/lib/cloud/instance/scripts)\n")
    c = conn(**{"r-node1": ("ACTIVE", None, console)})
    with pytest.raises(RefarchError, match=r"^r-node1: cloud-init failed \(console log\): .*scripts-user"):
        await_boot(c, {"r-node1": "r-node1"}, 60, clock=clock(), sleep=lambda s: None)


def test_datasource_none_means_no_keys():
    c = conn(**{"r-node1": ("ACTIVE", None, FINISHED.replace("DataSourceConfigDrive [net,ver=2][source=/dev/sr0]",
                                                              "DataSourceNone"))})
    with pytest.raises(RefarchError, match=r"^r-node1: cloud-init found no datasource"):
        await_boot(c, {"r-node1": "r-node1"}, 60, clock=clock(), sleep=lambda s: None)


def test_a_slow_guest_is_named_with_its_consoles_last_line():
    c = conn(**{"r-node1": ("ACTIVE", None, "[  14.7] systemd[1]: Hostname set to <vm>.\n")})
    with pytest.raises(RefarchError, match=r"^r-node1: not booted within 20 s; .*Hostname set to <vm>\.$"):
        await_boot(c, {"r-node1": "r-node1"}, 20, clock=clock(), sleep=lambda s: None)


def test_fake_servers_need_only_be_active():
    c = conn(**{"r-node1": ("ACTIVE", None, "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE")})
    assert set(await_boot(c, {"r-node1": "r-node1"}, 60, clock=clock(), sleep=lambda s: None, guest_os=False)) == {"r-node1"}


def test_a_failed_apply_names_each_server_in_error_with_its_fault():
    from refarch.clouds.openstack_nodes import server_faults

    fault = {"code": 500, "message": "No valid host was found. "}
    servers = {"r-node1": ("ACTIVE", None, ""), "r-node2": ("ERROR", fault, ""), "other-node1": ("ERROR", fault, "")}
    c = conn(**servers)
    assert server_faults(c, "r") == ["node2: server in ERROR: No valid host was found."]
