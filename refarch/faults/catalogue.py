"""The fault catalogue: each case stands for a field report (what people hit
when deploying or running Horovod clusters), breaks one node of a deployed
local cluster that way (:mod:`.injections`), names the checks that must then
fail (a pytest ``-k`` expression over tests/integration) and the message they
must show, and reverts itself so the next case starts from a healthy cluster.
The ids F1-F22 are the field reports; the named cases cover the remaining
node and cluster checks and properties.

README.md's table of the cases is :func:`readme_table`; rewrite it with
``python -m refarch.faults.catalogue --write-readme``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import proc
from ..paths import ROOT
from . import base
from . import injections as inj
from .base import Fault, backup, files_state, restore, states

FAULTS: tuple[Fault, ...] = (
    Fault("F1", "two nodes get the same hostname",
          report_kind="duplicate hostnames: MPI and NCCL take two machines for one",
          inject=lambda c: c.sh(c.node(1), f"hostname {c.node(0)}"),
          revert=lambda c: c.sh(c.node(1), f"hostname {c.node(1)}"),
          checks="test_hostnames_unique", must_fail=("test_hostnames_unique",),
          message=r"duplicate hostnames: '{n0}' on {n0}, {n1}"),
    Fault("F2", "peers reach only TCP 22 (node firewall)",
          report_kind="peers reach only TCP 22 (firewall, security group): cross-node launches hang or fail",
          inject=lambda c: c.netns(c.node(1), "nft", inj.FIREWALL.format(cidr=c.contract.cluster_cidr)),
          revert=lambda c: c.netns(c.node(1), "nft", "delete table inet refarch_fault"),
          # After the revert, no probe listener may be left behind.
          checks="test_peer_ports_reachable or test_listening_sockets_allowed or communication",
          must_fail=("test_peer_ports_reachable[", "test_property[communication.busbw_to_tcp]"),
          message=r"{n0} -> {n1} \(\S+\) TCP \d+: timed out after 5 s",
          judges_figures=True, state=base.firewall_state),
    Fault("F3", "the share's root-owned export: the training user cannot write",
          report_kind="a share the training user cannot write: checkpoints and Ansible's directories fail",
          inject=lambda c: c.sh(c.node(0), "chown root:root /srv/shared && chmod 0755 /srv/shared"),
          revert=lambda c: c.sh(c.node(0), f"chown {c.training_user}:{c.training_user} /srv/shared"
                                " && chmod 0775 /srv/shared"),
          checks="test_shared_storage_write_read_everywhere",
          must_fail=("test_shared_storage_write_read_everywhere[",),
          message=r"training user {user} cannot write /shared/\.refarch-check-"),
    Fault("F4", "one node gets another TensorFlow than Horovod was built against",
          report_kind="another TensorFlow on one node than Horovod's build: version mismatch, undefined symbol",
          inject=inj.inject_tf, revert=inj.revert_tf,
          checks="test_versions_consistent or test_horovod_build",
          must_fail=("test_versions_consistent", "test_horovod_build[{n1}]"),
          message=r"tensorflow-cpu: {n0}=2\.15\.1, {n1}=2\.14\.1"),
    Fault("F5", "a peer's host key is not pre-seeded",
          report_kind="peer host keys not pre-seeded: launches stop at 'Host key verification failed'",
          inject=lambda c: c.sh(c.node(0), backup("/etc/ssh/ssh_known_hosts")
                                + f" && sed -i '/^{c.node(1)},/d' /etc/ssh/ssh_known_hosts"),
          revert=lambda c: c.sh(c.node(0), restore("/etc/ssh/ssh_known_hosts")),
          checks="test_ssh_to_every_peer", must_fail=("test_ssh_to_every_peer[{n0}]",),
          message=r"{n0} -> {n1}: .*Host key verification failed"),
    Fault("F6", "PasswordAuthentication yes on one node",
          report_kind="password login enabled on one node: a security audit finding",
          inject=lambda c: c.sh(c.node(1), "echo 'PasswordAuthentication yes' > /etc/ssh/sshd_config.d/00-fault.conf"
                                " && systemctl reload ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault.conf && systemctl reload ssh"),
          checks="test_sshd_effective_settings", must_fail=("test_sshd_effective_settings[{n1}]",),
          message=r"{n1}: sshd -T: passwordauthentication is 'yes', expected 'no'"),
    Fault("F7", "the cluster has fewer nodes than the profile expects",
          report_kind="fewer nodes than planned: a node never came up, jobs run smaller",
          inject=inj.expect(**{"nodes.count": 3}), revert=inj.expect_revert,
          checks="test_node_count", must_fail=("test_node_count",),
          message=r"profile local expects 3 nodes, 2 answer \({n0}, {n1}\): missing node3"),
    Fault("F8", "sshd on one node drops concurrent unauthenticated logins (low MaxStartups)",
          report_kind="sshd drops concurrent logins (low MaxStartups): launches fail at random",
          inject=lambda c: c.sh(c.node(1), "echo 'MaxStartups 1:100:1' > /etc/ssh/sshd_config.d/00-fault-startups.conf"
                                " && systemctl reload ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault-startups.conf"
                                " && systemctl reload ssh"),
          checks="test_ssh_burst_to_every_peer", must_fail=("test_ssh_burst_to_every_peer[{n0}]",),
          message=r"{n0} -> {n1}: \d+ of 3 concurrent logins dropped \(.+\); "
                  r"{n1}'s effective MaxStartups is 1:100:1 \(sshd -T\)"),
    Fault("F9", "Ansible cannot become the training user on one node (no setfacl: package acl missing)",
          report_kind="Ansible cannot become the training user (no acl): temporary-file permissions fail",
          inject=lambda c: c.sh(c.node(1), "mv /usr/bin/setfacl /root/setfacl.refarch-fault"),
          revert=lambda c: c.sh(c.node(1), "mv /root/setfacl.refarch-fault /usr/bin/setfacl"),
          checks="test_file_module_as_training_user", must_fail=("test_file_module_as_training_user[{n1}]",),
          message=r"{n1}: an Ansible file module cannot run as {user} \(become_user\): .*"
                  r"Failed to set permissions on the temporary files"),
    Fault("F10", "training without gradient averaging (DistributedGradientTape removed on every node)",
          report_kind="training without gradient averaging: scaling looks great, the model is wrong",
          inject=inj.no_gradient_averaging, revert=inj.gradient_averaging_back,
          checks="test_property and (ranks_diverged or efficiency)",
          must_fail=("test_property[convergence.ranks_diverged]",),
          must_warn=("scaling.efficiency",), judges_figures=True, state=files_state(*inj.WORKLOADS.split()),
          message=r"convergence\.ranks_diverged = 1 ranks \(after training, the weights of rank 1 on {n1} differ "
                  r"from rank 0's on {n0}: the ranks did not average their gradients\) is above the upper bound 0"),
    Fault("busy-neighbour", "the machine is busy while np=1 is measured (four busy loops share the first node's "
                            "CPU during the np=1 job, as other jobs on a shared CI runner do)",
          report_kind="figures measured on a busy machine (other jobs on a shared CI runner)",
          inject=inj.busy_neighbour, revert=inj.busy_neighbour_gone, state=base.neighbour_state,
          checks="test_training_single_rank or efficiency",
          must_fail=("test_property[scaling.efficiency]",),
          must_pass=("test_training_single_rank",), judges_figures=True,
          message=r"scaling\.efficiency = [\d.]+ ratio .* cannot be judged \(an error, never a pass\): np=1 "
                  r"measured [\d.]+ \([\d.-]+\) images/sec alone and [\d.]+ \([\d.-]+\) in rounds beside np=2",
          source="measured before: np=1 15.9 against 37-39 images/sec, an efficiency of 136 %"),
    Fault("F11", "the profile expects Horovod with PyTorch; the build has TensorFlow only",
          report_kind="a framework the profile expects missing from the Horovod build although check-build claims it",
          inject=inj.expect(**{"expect.horovod_build.frameworks": ["TensorFlow", "PyTorch"]}), revert=inj.expect_revert,
          checks="test_horovod_build", must_fail=("test_horovod_build[{n0}]", "test_horovod_build[{n1}]"),
          message=r"{n0}: .*horovod\.torch\.mpi_lib_v2 \(PyTorch\) does not import: "
                  r"ModuleNotFoundError: No module named 'horovod\.torch\.mpi_lib_v2'"),
    Fault("F12", "one node unreachable over SSH (sshd moved to port 2222)",
          report_kind="a node unreachable over SSH: a wall of connection errors",
          inject=lambda c: c.sh(c.node(1), "echo 'Port 2222' > /etc/ssh/sshd_config.d/00-fault-port.conf"
                                " && systemctl restart ssh"),
          revert=lambda c: c.sh(c.node(1), "rm -f /etc/ssh/sshd_config.d/00-fault-port.conf && systemctl restart ssh"),
          checks="test_node_reachable or test_sshd_effective_settings or test_hostnames_unique",
          must_fail=("test_node_reachable[{n1}]",),
          must_skip=("test_sshd_effective_settings[{n1}]", "test_hostnames_unique"),
          message=r"{n1} \(\S+:22\): connection refused"),
    Fault("F13", "orted is not on the non-interactive PATH of one node",
          report_kind="MPI's daemon not on the non-interactive PATH: 'orted: command not found' from mpirun",
          inject=lambda c: c.sh(c.node(1), "mv /usr/bin/orted /root/orted.refarch-fault"),
          revert=lambda c: c.sh(c.node(1), "mv /root/orted.refarch-fault /usr/bin/orted"),
          checks="test_mpirun_across_all_nodes", must_fail=("test_mpirun_across_all_nodes",),
          message=r"mpirun from {n0} failed \(exit \d+\): .*orted: command not found; "
                  r"orted is not on the non-interactive PATH of {n1} \(full output: "),
    Fault("F14", "the cluster interface has another name on one node (eth0 renamed ens3)",
          report_kind="cluster interfaces named differently across nodes: Gloo cannot find the interface",
          inject=inj.rename_interface("eth0", "ens3"), revert=inj.rename_interface("ens3", "eth0"),
          checks="test_interface_pinned or test_training_single_rank or test_training_on_all_nodes",
          must_fail=("test_interface_pinned[{n1}]", "test_training_on_all_nodes"),
          must_pass=("test_training_single_rank",),
          message=r"not launched: Horovod would be pinned to eth0: {n1}: interface eth0 does not carry its "
                  r"cluster address \S+ \(its cluster interface is ens3\)"),
    Fault("exposed-port", "a listener on 0.0.0.0 on one node, and a policy rule that admits it from anywhere",
          report_kind="a port open to anywhere (a hand-edited security group)",
          inject=inj.exposed_port, revert=inj.exposed_port_revert,
          checks="test_property and exposure", judges_figures=True,
          must_fail=("test_property[exposure.outside_open_ports]", "test_property[exposure.admin_unexpected_ports]"),
          must_pass=("test_property[exposure.password_auth_nodes]",),
          message=r"exposure\.outside_open_ports = 1 ports \(outside probe \S+: {n1} \S+ tcp/8099 open\) "
                  r"is above the upper bound 0"),
    Fault("udp-exposed", "a UDP service on 0.0.0.0:111 of one node that answers nothing, and a policy rule that "
                         "admits udp/111 from anywhere (rpcbind exposed)",
          report_kind="a UDP service open to anywhere that answers no probe (rpcbind after nfs-common)",
          inject=inj.udp_exposed(111), revert=inj.udp_exposed_revert(111),
          checks="test_property and exposure", judges_figures=True,
          must_fail=("test_property[exposure.outside_open_ports]", "test_property[exposure.admin_unexpected_ports]"),
          must_pass=("test_property[exposure.password_auth_nodes]",),
          message=r"exposure\.outside_open_ports = 1 ports \(outside probe \S+: {n1} \S+ udp/111 open\) "
                  r"is above the upper bound 0"),
    Fault("not-mounted-at-boot", "the share is mounted by hand but not listed in /etc/fstab on one node",
          report_kind="the share gone after a node restart (mounted by hand, not in fstab)",
          inject=lambda c: c.sh(c.node(1), backup("/etc/fstab")
                                + r" && sed -i 's|^\(.* /shared .*\)$|#\1|' /etc/fstab"),
          revert=lambda c: c.sh(c.node(1), restore("/etc/fstab") + " && (mountpoint -q /shared || mount /shared)"),
          checks="test_property and restart_healthy", long=True,
          state=states(files_state("/etc/fstab", node=1), base.mount_state),
          must_fail=("test_property[availability.restart_healthy_s]",),
          message=r"{n1} healthy after [\d.]+ s, but checks fail after its restart \(without Ansible\): "
                  r".*test_shared_storage_mounted\[{n1}\]: (AssertionError: )?{n1}: nothing mounted at /shared"),
    Fault("stop-ignored", "the cloud accepts a stop and the node keeps running (an OpenStack server that stays "
                          "ACTIVE after a stop call)",
          report_kind="a cloud stop that leaves the server running",
          inject=inj.stop_ignored, revert=inj.stop_carried_out,
          checks="test_property and (restart_healthy or availability.recovery_s)", long=True, state=base.driver_state,
          must_fail=("test_property[availability.restart_healthy_s]", "test_property[availability.recovery_s]"),
          message=r"{n1} still answers SSH from {n0} \(cloud state running\) 30 s after stop_node returned: "
                  r"the node was never down"),
    Fault("no-cooldown", "elastic Horovod without a blacklist cooldown: a stopped node never rejoins",
          report_kind="a failed node that never rejoins the elastic job (blacklisted for good)",
          inject=inj.both(inj.no_cooldown, inj.expect(**{"availability.step_timeout_s": 75})),
          revert=inj.both(inj.cooldown_back, inj.expect_revert),
          checks="test_property and (availability.recovery_s or availability.rejoin_s)", long=True,
          state=states(files_state(inj.LAUNCHER), base.overrides_state),
          must_fail=("test_property[availability.rejoin_s]",),
          must_pass=("test_property[availability.recovery_s]",),
          message=r"elastic job back at world size 2 after {n1} was started again: not within 75 s",
          source="measured by hand: never rejoined in 200 s"),
    Fault("no-ssh-alive", "the bounding settings reverted: the training user's SSH keeps a session to a silent "
                          "node open (OpenSSH's defaults), so the elastic driver never takes a cut-off node as failed",
          report_kind="an elastic job that waits forever on a node cut off by the network",
          inject=inj.both(inj.no_ssh_alive, inj.expect(**{"availability.step_timeout_s": 50})),
          revert=inj.both(inj.ssh_alive_back, inj.expect_revert),
          checks="test_ssh_gives_up_on_a_silent_peer or availability.partition_recovery_s", long=True,
          state=states(files_state(inj.SSH_ELASTIC), base.overrides_state),
          must_fail=("test_ssh_gives_up_on_a_silent_peer[{n0}]", "test_property[availability.partition_recovery_s]"),
          message=r"elastic job goes on at world size 1 after {n1} was cut off: not within 50 s: .*the elastic "
                  r"driver on {n0} still waits on its SSH session to {n1}",
          source="measured before: never went on within 240 s"),
    Fault("F18", "packets above 1400 bytes between two nodes vanish (path MTU blackhole of an overlay network)",
          report_kind="path MTU blackhole between nodes: SSH, MPI and the share hang while small pings pass",
          inject=inj.mtu_blackhole(1400),
          revert=lambda c: c.netns(c.node(1), "nft", "delete table inet refarch_fault_mtu"),
          state=base.firewall_state,
          checks="test_network_path_to_every_peer or test_ssh_to_every_peer or test_mpirun_across_all_nodes "
                 "or test_shared_storage",
          must_fail=("test_network_path_to_every_peer[{n0}]", "test_network_path_to_every_peer[{n1}]",
                     "test_ssh_to_every_peer[{n0}]", "test_mpirun_across_all_nodes",
                     "test_shared_storage_mounted[{n1}]"),
          message=r"{n0} -> {n1} \(\S+\): packets above 1400 bytes vanish \(path MTU blackhole\): the largest "
                  r"don't-fragment ping that passes is 1372 bytes of payload, below \S+'s MTU 1500",
          more_messages=(r"SSH between nodes failed: not tried: {n0} -> {n1} \(\S+\): packets above 1400 bytes vanish",
                         r"mpirun from {n0} across 2 nodes not launched: network path: {n0} -> {n1} \(\S+\): "
                         r"packets above 1400 bytes vanish",
                         r"{n1}: /shared not read: {n1} -> {n0} \(\S+\): packets above 1400 bytes vanish"),
          source="by hand on main: six checks timed out after 7 min 52 s, the cause unnamed"),
    Fault("F19", "the training user's home is writable by others on one node (sshd's StrictModes refuses its key)",
          report_kind="sshd refusing a login for its own reason: only 'Permission denied (publickey)' seen",
          inject=lambda c: c.sh(c.node(1), f"chmod 0777 /home/{c.training_user}"),
          revert=lambda c: c.sh(c.node(1), f"chmod 0755 /home/{c.training_user}"),
          state=base.home_state,
          checks="test_ssh_to_every_peer or test_ssh_burst_to_every_peer or test_mpirun_across_all_nodes",
          must_fail=("test_ssh_to_every_peer[{n0}]", "test_ssh_burst_to_every_peer[{n0}]",
                     "test_mpirun_across_all_nodes"),
          message=r"SSH between nodes failed: {n0} -> {n1}: {user}@{n1}: Permission denied \(publickey\)\.; "
                  r"{n1}'s sshd: Authentication refused: bad ownership or modes for directory /home/{user}",
          more_messages=(r"{n0} -> {n1}: a single login fails too, not a concurrency limit: .*Permission denied.*; "
                         r"{n1}'s sshd: Authentication refused: bad ownership or modes for directory /home/{user}",
                         r"mpirun from {n0} failed \(exit \d+\): .*Permission denied.*; {n1}'s sshd: Authentication "
                         r"refused: bad ownership or modes for directory /home/{user}"),
          source="by hand on main: 'Permission denied (publickey)', the burst check blamed "
                 "MaxStartups, mpirun dumped a CommandResult"),
    Fault("F20", "the share's server drops sshd's sftp subsystem; the other node's sshfs reconnects into it",
          report_kind="the share's server loses its file service: 'Input/output error' on every client",
          inject=inj.no_sftp, revert=inj.sftp_back,
          state=states(files_state("/etc/ssh/sshd_config", node=0), base.mount_state),
          checks="test_shared_storage", must_fail=("test_shared_storage_write_read_everywhere[{n1}]",),
          message=r"{n1}: training user {user} cannot write /shared/\.refarch-check-{n1}: .*Input/output error; "
                  r"{n0} \(the share's server\): its sshd offers no sftp subsystem \(sshd -T lists no Subsystem\); "
                  r"{n1}'s sshfs has no SSH session to {n0} \(its reconnects fail\)",
          source="by hand on main: 'Input/output error' on every check, the server unnamed"),
    Fault("uid", "the training user has another uid on one node",
          report_kind="the training user's uid differs across nodes",
          inject=lambda c: c.sh(c.node(1), f"usermod -u 2999 {c.training_user}"),
          revert=lambda c: c.sh(c.node(1), f"usermod -u 2001 {c.training_user}"),
          checks="test_training_user", must_fail=("test_training_user[{n1}]", "test_training_user_uid_consistent"),
          message=r"{n1}: {user} has uid 2999, expected 2001"),
    Fault("unmounted", "the share is not mounted on one node",
          report_kind="the share not mounted on one node",
          inject=lambda c: c.sh(c.node(1), "umount -l /shared"),
          revert=lambda c: c.sh(c.node(1), "mount /shared"),
          checks="test_shared_storage_mounted", must_fail=("test_shared_storage_mounted[{n1}]",),
          message=r"{n1}: nothing mounted at /shared"),
    Fault("dead-mount", "the share's sshfs process died on one node (still listed as mounted)",
          report_kind="a dead share mount still listed as mounted",
          inject=lambda c: c.sh(c.node(1), "pkill -9 -f '[s]shfs .* /shared'; sleep 1"),
          revert=lambda c: c.sh(c.node(1), "umount -l /shared; mount /shared"),
          checks="test_shared_storage_mounted", must_fail=("test_shared_storage_mounted[{n1}]",),
          message=r"{n1}: /shared is mounted \(fuse\.sshfs\) but unusable: .*Transport endpoint is not connected"),
    Fault("horovod-broken", "Horovod cannot load MPI on one node",
          report_kind="Horovod cannot load MPI on one node",
          inject=lambda c: c.sh(c.node(1), "mv /usr/lib/x86_64-linux-gnu/libmpi.so.40 /root/"),
          revert=lambda c: c.sh(c.node(1), "mv /root/libmpi.so.40 /usr/lib/x86_64-linux-gnu/"),
          checks="test_horovod_build", must_fail=("test_horovod_build[{n1}]",),
          message=r"{n1}: (horovodrun --check-build failed|Horovod lacks)"),
    Fault("mpirun-hostfile", "the MPI hostfile gives one node the other node's slot",
          report_kind="a wrong MPI hostfile: one node runs another node's ranks",
          inject=lambda c: c.sh(c.node(0), backup("/etc/openmpi/cluster-hostfile")
                                + f" && sed -i -e '/^{c.node(1)} /d' -e 's/^{c.node(0)} slots=1/{c.node(0)} slots=2/'"
                                " /etc/openmpi/cluster-hostfile"),
          revert=lambda c: c.sh(c.node(0), restore("/etc/openmpi/cluster-hostfile")),
          checks="test_mpirun_across_all_nodes", must_fail=("test_mpirun_across_all_nodes",),
          message=r"expected each of \['{n0}', '{n1}'\] once, got \['{n0}', '{n0}'\]"),
    Fault("name-resolution", "a node resolves a peer to a wrong address",
          report_kind="a peer resolved to a wrong address",
          inject=lambda c: c.sh(c.node(0), backup("/etc/hosts")
                                + f" && sed -i 's/^.* {c.node(1)}$/192.0.2.99 {c.node(1)}/' /etc/hosts"),
          revert=lambda c: c.sh(c.node(0), restore("/etc/hosts")),
          checks="test_resolves_every_peer", must_fail=("test_resolves_every_peer[{n0}]",),
          message=r"{n0} resolves: {n1} -> 192\.0\.2\.99"),
    Fault("time", "chrony is stopped on one node",
          report_kind="clocks not synchronised (chrony stopped)",
          inject=lambda c: c.sh(c.node(1), "systemctl stop chrony"),
          revert=lambda c: c.sh(c.node(1), "systemctl start chrony && for i in $(seq 30); do "
                                "chronyc -n tracking | grep -q 'Leap status *: Normal' && break; sleep 1; done"),
          checks="test_time_synchronised", must_fail=("test_time_synchronised[{n1}]",),
          message=r"{n1}: time: chrony is inactive/dead \(result success\); chronyc: .*(chronyd|Cannot talk)"),
    Fault("interface-pin", "Horovod is pinned to the wrong interface on one node",
          report_kind="Horovod pinned to the wrong interface",
          inject=lambda c: c.sh(c.node(1), backup("/etc/profile.d/horovod.sh")
                                + " && sed -i 's/^export REFARCH_CLUSTER_IFACE=.*/export REFARCH_CLUSTER_IFACE=\"lo\"/'"
                                " /etc/profile.d/horovod.sh"),
          revert=lambda c: c.sh(c.node(1), restore("/etc/profile.d/horovod.sh")),
          checks="test_interface_pinned", must_fail=("test_interface_pinned[{n1}]",),
          message=r"{n1}: cluster interface is \S+, but REFARCH_CLUSTER_IFACE=lo"),
    Fault("extra-listener", "a stray service listens on one node",
          report_kind="a stray service listening on one node",
          inject=lambda c: proc.run(["podman", "exec", "-d", c.container(c.node(1)), "python3", "-m", "http.server",
                                     "8099"], timeout_s=30),
          revert=lambda c: c.sh(c.node(1), "pkill -f 'http.server 8099'; sleep 1", check=False),
          checks="test_listening_sockets_allowed", must_fail=("test_listening_sockets_allowed[{n1}]",),
          message=r"{n1}: listening beyond the allow-list .*tcp/8099"),
    Fault("ca-untrusted", "the extra CA certificates are gone from one node's bundle (pip would fail TLS)",
          report_kind="a node without the extra CA certificates: pip fails TLS",
          inject=lambda c: c.sh(c.node(1), "mkdir -p /root/.refarch-ca && mv /usr/local/share/ca-certificates/refarch-*"
                                " /root/.refarch-ca/ && update-ca-certificates --fresh >/dev/null"),
          revert=lambda c: c.sh(c.node(1), "mv /root/.refarch-ca/* /usr/local/share/ca-certificates/ &&"
                                " update-ca-certificates --fresh >/dev/null"),
          checks="test_extra_ca_certificates_trusted", must_fail=("test_extra_ca_certificates_trusted[{n1}]",),
          message=r"{n1}: /etc/ssl/certs/ca-certificates.crt lacks the extra CA certificates \['/", requires_ca=True),
)


def by_id(fault_id: str) -> Fault:
    """The fault case named ``fault_id``.

    Raises:
        KeyError: no such fault.
    """
    for fault in FAULTS:
        if fault.id == fault_id:
            return fault
    raise KeyError(fault_id)


#: The markers around README.md's table of the fault cases.
TABLE_START = "<!-- fault-table:start -->"
TABLE_END = "<!-- fault-table:end -->"

#: The node names and training user the table's messages are shown with (the local profile's).
_SHOWN_AS = {"n0": "node1", "n1": "node2", "user": "hvd"}


def _cell(text: str) -> str:
    """``text`` as a markdown table cell (its pipes escaped)."""
    return text.replace("|", "\\|")


def readme_table() -> str:
    """README.md's table of the fault cases, one row per case of :data:`FAULTS`
    in order: id, field report, what is injected, and the messages its
    failures must match (regexes, shown for node1, node2 and user hvd).
    Markdown lines without the markers, no trailing newline."""
    rows = ["| id | field report | what is injected | the message it must produce (regex) |", "|---|---|---|---|"]
    for fault in FAULTS:
        messages = [m.format(**_SHOWN_AS) for m in fault.messages]
        assert not any("`" in m for m in messages), f"{fault.id}: a message with a backtick breaks the table"
        rows.append(f"| {fault.id} | {_cell(fault.report_kind)} | {_cell(fault.title)} | "
                    + "<br>".join(f"`{_cell(m)}`" for m in messages) + " |")
    return "\n".join(rows)


def readme_block(text: str) -> str | None:
    """The table between README's markers in ``text`` (stripped), or None without both markers."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        return None
    return text[start + len(TABLE_START):end].strip()


def with_table(text: str) -> str:
    """``text`` (README.md) with :func:`readme_table` between its markers.

    Raises:
        ValueError: ``text`` lacks the markers.
    """
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {TABLE_START} ... {TABLE_END} block")
    return text[:start] + f"{TABLE_START}\n{readme_table()}\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refarch.faults.catalogue",
                                     description="The fault cases' table of README.md.")
    parser.add_argument("--write-readme", action="store_true",
                        help="rewrite the table between README.md's fault-table markers")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.write_readme:
        print(readme_table())
        return 0
    text = args.readme.read_text(encoding="utf-8")
    new = with_table(text)
    if new != text:
        args.readme.write_text(new, encoding="utf-8")
    print(f"{args.readme}: fault table {'rewritten' if new != text else 'already current'} ({len(FAULTS)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
