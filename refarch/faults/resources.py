"""The resource fault cases: a node short of what a job needs before it
starts (an open-file limit, memory, CPU, space in /tmp: F23-F25, cpu-quota)
or while it trains (cpu-straggler: a slow node among fast ones).  Each is
proven by the headroom check or a scaling property.  :mod:`.catalogue`
lists them with the other cases.
"""

from __future__ import annotations

from . import injections as inj
from .base import Fault, files_state

FAULTS: tuple[Fault, ...] = (
    Fault("F23", "the training user's open-file limit set to 20 on one node (limits.d)",
          report_kind="an open-file limit too low for a job's sockets: Open MPI's btl/tcp accept fails",
          inject=lambda c: c.sh(c.node(1), f"printf '{c.training_user} soft nofile 20\\n{c.training_user} hard nofile "
                                           f"20\\n' > {inj.LIMITS_FAULT}"),
          revert=lambda c: c.sh(c.node(1), f"rm -f {inj.LIMITS_FAULT}"),
          checks="test_resource_headroom", state=files_state(inj.LIMITS_FAULT, node=1),
          must_fail=("test_resource_headroom[{n1}]",), must_pass=("test_resource_headroom[{n0}]",),
          message=r"{n1}: nofile limit of {user} over SSH: 20, need 1024",
          source="by hand on main: mpirun across 2 nodes timed out after 120 s, neither the node nor the limit named"),
    Fault("F24", "one node's memory limited to 700 MB (its cgroup), less than a training rank's resident size",
          report_kind="a node without the memory a rank needs: the rank thrashes and the whole ring crawls",
          inject=inj.memory_limit(700), revert=inj.memory_limit_back, state=inj.memory_state,
          checks="test_resource_headroom or test_training_on_all_nodes",
          must_fail=("test_resource_headroom[{n1}]", "test_training_on_all_nodes"),
          must_pass=("test_resource_headroom[{n0}]",),
          message=r"{n1}: memory: \d+ MiB available \(cgroup limit 700 MiB, \d+ MiB in use; MemAvailable \d+ MiB\), "
                  r"need 1380 MiB \(1 rank x 1124 MiB resident \(smoke\) \+ 256 MiB reserve\)",
          # The job is stopped within 3 minutes of its start (not 15), naming
          # the rank behind on node2 and node2's memory pressure.
          more_messages=(r"np=2 on {n0}:1,{n1}:1 stopped (\d|\d\d|1[0-7]\d) s after its start: no rank got further "
                         r"for \d+ s .*behind: (rank 1|the rank) on {n1} .*{n1}: memory: [\d,]+ major page faults",),
          source="by hand on main: the np=2 smoke job ran past 900 s four times (15 min 34 s), node2 and its "
                 "memory named nowhere"),
    Fault("cpu-quota", "one node's CPU quota cut to half a core (its cgroup), less than a rank's thread",
          report_kind="a CPU-throttled node: the whole ring goes at the slowest node's pace",
          inject=inj.cpu_quota(0.5), revert=inj.cpu_quota_back, state=inj.cpu_state,
          checks="test_resource_headroom", must_fail=("test_resource_headroom[{n1}]",),
          must_pass=("test_resource_headroom[{n0}]",),
          message=r"{n1}: CPU: 0\.5 CPUs \(cgroup quota 50000/100000 us; nproc \d+\), need 1 \(1 rank x 1 intra-op "
                  r"thread\)"),
    Fault("cpu-straggler", "one node's CPU quota cut to half a core while the smoke job trains across nodes",
          report_kind="one slow node among fast ones: every step of the ring waits for it",
          inject=inj.cpu_quota(0.5), revert=inj.cpu_quota_back, state=inj.cpu_state, judges_figures=True,
          checks="test_property and straggler_ratio", must_fail=("test_property[scaling.straggler_ratio]",),
          message=r"scaling\.straggler_ratio = [\d.]+ ratio \(slowest: rank 1 on {n1}, median [\d.]+ s of compute "
                  r"per step; fastest: rank 0 on {n0}, [\d.]+ s\) is above the upper bound [\d.]+"),
    Fault("F25", "one node's /tmp a full file system (no space, no inodes left)",
          report_kind="/tmp out of space or inodes: Open MPI's session directory cannot be made",
          inject=lambda c: c.sh(c.node(1), "mount -t tmpfs -o size=1m,nr_inodes=64 refarch-fault-tmp /tmp && "
                                           "(dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; i=0; "
                                           "while touch /tmp/f$i 2>/dev/null; do i=$((i+1)); done; true)"),
          revert=lambda c: c.sh(c.node(1), "umount /tmp || umount -l /tmp"),
          checks="test_resource_headroom or test_mpirun_across_all_nodes",
          must_fail=("test_resource_headroom[{n1}]", "test_mpirun_across_all_nodes"),
          must_pass=("test_resource_headroom[{n0}]",),
          more_messages=(r"mpirun from {n0} failed \(exit \d+\): .*{n1}: orted could not create /tmp/ompi\.{n1}\.\d+: "
                         r"No space left on device",),
          state=lambda c: {f"{c.node(1)}: /tmp": c.sh(c.node(1), "findmnt -n -o SOURCE,FSTYPE /tmp").stdout.strip()},
          message=r"{n1}: .*/tmp \(/tmp\): 0 MiB free, need 256 MiB; /tmp \(/tmp\): 0 inodes free, need 10000",
          source="by hand on main: mpirun said ORTE was unable to reliably start one or more daemons; node2 and "
                 "/tmp named by no check that failed for them"),
)
