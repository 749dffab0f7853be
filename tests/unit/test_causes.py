"""refarch.judge.causes on real recorded outputs (tests/unit/data/causes: the
journal of node2's sshd refusing node1's logins for each reason, ping's
summaries, sshd -T with and without the sftp subsystem)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch.judge import causes

DATA = Path(__file__).parent / "data" / "causes"
NODE1 = "10.213.0.10"


@pytest.mark.parametrize("record, reason", [
    ("strictmodes", "Authentication refused: bad ownership or modes for directory /home/hvd"),
    ("denyusers", "User hvd from 10.213.0.10 not allowed because listed in DenyUsers"),
    ("allowusers", "User hvd from 10.213.0.10 not allowed because not listed in AllowUsers"),
    ("locked", "pam_unix(sshd:account): account hvd has expired (account expired); "
               "fatal: Access denied for user hvd by PAM account configuration [preauth]"),
    ("nokey", "no key of hvd's was accepted (sshd logs only: connection closed by authenticating user)"),
])
def test_sshd_refusal_of_each_kind(record, reason):
    assert causes.sshd_refusals((DATA / f"{record}.json").read_text(), NODE1) == [reason]


def test_accepted_logins_and_other_clients_give_no_reason():
    assert causes.sshd_refusals((DATA / "healthy.json").read_text(), NODE1) == []
    assert causes.sshd_refusals((DATA / "strictmodes.json").read_text(), "10.213.0.12") == []
    # 10.213.0.1 is a prefix of node1's address, not node1.
    assert causes.sshd_refusals((DATA / "strictmodes.json").read_text(), "10.213.0.1") == []


def test_ping_loss():
    assert causes.parse_ping_loss((DATA / "ping-healthy.txt").read_text()) == 0.0
    assert causes.parse_ping_loss((DATA / "ping-unreachable.txt").read_text()) == 100.0
    with pytest.raises(ValueError, match="no ping summary"):
        causes.parse_ping_loss("bash: ping: command not found")


def test_largest_passing_bisects():
    calls = []

    def passes(size):
        calls.append(size)
        return size <= 1400

    assert causes.largest_passing(passes, 576, 1500) == 1400
    assert len(calls) <= 12
    assert causes.largest_passing(lambda s: True, 576, 1500) == 1500
    assert causes.largest_passing(lambda s: False, 576, 1500) == 575


class BlackholeNode:
    """A testinfra-like host whose path drops IP packets above ``largest``
    bytes and loses ``lost`` of 20 small pings."""

    def __init__(self, largest, lost=0, mtu=1500):
        self.largest, self.lost, self.mtu, self.commands = largest, lost, mtu, []
        self.route = "eth0"

    def sudo(self):
        from contextlib import nullcontext
        return nullcontext()

    def check_output(self, command):
        assert "/sys/class/net/eth0/mtu" in command
        return str(self.mtu)

    def run(self, command):
        self.commands.append(command)
        if command.startswith("ip -o route get "):
            return SimpleNamespace(rc=0, stdout=f"{command.split()[-1]} dev {self.route} src 10.213.0.10 uid 0 \\"
                                                "    cache ", stderr="")
        if "-M do" in command:
            size = int(command.split(" -s ")[1].split()[0]) + causes.ICMP_OVERHEAD
            return SimpleNamespace(rc=0 if size <= self.largest else 1, stdout="", stderr="")
        text = (DATA / "ping-healthy.txt").read_text().replace("20 received", f"{20 - self.lost} received")
        return SimpleNamespace(rc=0 if self.lost < 20 else 1, stdout=text, stderr="")


def test_a_path_mtu_blackhole_is_named_with_the_largest_size():
    report = causes.probe_path(BlackholeNode(1400), "node1", "node2", "10.213.0.11", "eth0")
    assert report.path_mtu == 1400
    assert report.problem() == (
        "node1 -> node2 (10.213.0.11): packets above 1400 bytes vanish (path MTU blackhole): the largest "
        "don't-fragment ping that passes is 1372 bytes of payload, below eth0's MTU 1500; SSH, MPI and the "
        "share hang on it")


def test_a_healthy_path_takes_one_full_size_probe():
    node = BlackholeNode(1500)
    assert causes.probe_path(node, "node1", "node2", "10.213.0.11", "eth0").problem() == ""
    assert sum("-M do" in c for c in node.commands) == 1


def test_loss_and_unreachable_paths():
    assert "3 % of 20" not in causes.probe_path(BlackholeNode(1500, lost=1), "a", "b", "x", "eth0").problem()
    assert "10 % of 20 pings lost" in causes.probe_path(BlackholeNode(1500, lost=2), "a", "b", "x", "eth0").problem()
    assert causes.probe_path(BlackholeNode(1500, lost=20), "a", "b", "x", "eth0").problem() == (
        "a -> b (x): unreachable on the cluster network (20 of 20 pings lost)")


def test_an_unreachable_peer_routed_out_of_another_interface_names_the_route():
    node = BlackholeNode(1500, lost=20)
    node.route = "rfside0"
    assert causes.probe_path(node, "node1", "node2", "10.213.0.11", "eth0").problem() == (
        "node1 -> node2 (10.213.0.11): unreachable on the cluster network (20 of 20 pings lost): node1's route to "
        "10.213.0.11 leaves by rfside0, not eth0")
    assert causes.route_interface("10.0.0.3 dev eth1 src 10.0.0.2 uid 0 \\    cache ") == "eth1"
    assert causes.route_interface("RTNETLINK answers: Network is unreachable") == ""


def test_the_sftp_subsystem_of_the_sshfs_server():
    assert causes.sftp_problem((DATA / "sshd-T-sftp.txt").read_text()) == ""
    assert causes.sftp_problem((DATA / "sshd-T-no-sftp.txt").read_text()) == (
        "its sshd offers no sftp subsystem (sshd -T lists no Subsystem)")


def test_the_nfs_server_side():
    exported = "/srv/shared   \t10.0.0.0/24(sync,wdelay,hide,no_subtree_check,sec=sys,rw,secure,root_squash)\n"
    assert causes.nfs_problem("active\n", exported, "/srv/shared") == ""
    assert causes.nfs_problem("inactive\n", "", "/srv/shared") == (
        "nfs-server is inactive; /srv/shared is not exported (exportfs -v lists nothing)")


def test_owner_mismatch_names_both_idmapd_domains():
    same = {"node1": "2001:2001 hvd:hvd", "node2": "2001:2001 hvd:hvd", "node1:/srv/shared": "2001:2001 hvd:hvd"}
    assert causes.owner_problem(same, {"node1": "localdomain", "node2": "localdomain"}) == ""
    owners = {**same, "node2": "65534:65534 nobody:nogroup"}
    assert causes.owner_problem(owners, {"node1": "localdomain", "node2": "other.example"}) == (
        "the owner differs: node1 sees 2001:2001 hvd:hvd, node2 sees 65534:65534 nobody:nogroup, "
        "node1:/srv/shared sees 2001:2001 hvd:hvd; NFSv4 idmapd domains differ: node1 'localdomain', "
        "node2 'other.example' (nfsidmap -d)")
    assert "idmapd" not in causes.owner_problem(owners, {})


class JournalNode:
    """A testinfra-like target: its sshd journal since any time is
    ``record`` (tests/unit/data/causes), and ``getent passwd`` gives ``shell``."""

    def __init__(self, record, shell="/bin/bash"):
        self.record, self.shell = record, shell

    def sudo(self):
        from contextlib import nullcontext
        return nullcontext()

    def run(self, command):
        if command.startswith("journalctl -t sshd"):
            return SimpleNamespace(rc=0, stdout=(DATA / f"{self.record}.json").read_text(), stderr="")
        assert command == "getent passwd hvd"
        return SimpleNamespace(rc=0, stdout=f"hvd:x:2001:2001::/home/hvd:{self.shell}\n", stderr="")


def test_login_refusal_quotes_sshd_then_the_login_shell():
    contract = SimpleNamespace(node=lambda name: SimpleNamespace(address={"node1": NODE1}[name]))
    cluster = SimpleNamespace(contract=contract)
    refused = {"node2": JournalNode("strictmodes")}
    assert causes.login_refusal(refused, cluster, "node1", "node2", 0, "hvd") == (
        "node2's sshd: Authentication refused: bad ownership or modes for directory /home/hvd")
    nologin = {"node2": JournalNode("healthy", shell="/usr/sbin/nologin")}
    assert causes.login_refusal(nologin, cluster, "node1", "node2", 0, "hvd") == (
        "node2: hvd's login shell is /usr/sbin/nologin")
    assert causes.login_refusal({"node2": JournalNode("healthy")}, cluster, "node1", "node2", 0, "hvd") == ""
