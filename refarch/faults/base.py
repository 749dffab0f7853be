"""What a fault case is: where it is applied (:class:`FaultContext`), the
case itself (:class:`Fault`: the field report it stands for, what it
injects, the checks that must catch it and the messages they must show),
what runs after its revert (:func:`after_revert`), and the state readers
and shell snippets the injections (:mod:`.injections`) and the catalogue
(:mod:`.catalogue`) share.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import proc
from ..clouds.drivers import FAULT_DRIVER_ENV
from ..contract import Contract
from ..judge import neighbour
from ..run import RunDir


@dataclass
class FaultContext:
    """Where a fault is applied: the run's contract and its node containers."""

    run_id: str
    contract: Contract
    training_user: str = "hvd"

    def container(self, node: str) -> str:
        return f"{self.run_id}-{node}"

    def node(self, index: int) -> str:
        return self.contract.node_names[index]

    def sh(self, node: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``script`` as root in ``node`` (out of band, no SSH)."""
        return proc.run(["podman", "exec", self.container(node), "sh", "-c", script], timeout_s=300, check=check)

    def sh_every_node(self, script: str) -> None:
        """Run ``script`` as :meth:`sh` does in every node, in the contract's
        order; the first that exits non-zero raises
        :class:`subprocess.CalledProcessError` and the later nodes are left
        as they were."""
        for node in self.contract.node_names:
            self.sh(node, script)

    def netns(self, node: str, *cmd: str) -> subprocess.CompletedProcess:
        """Run ``cmd`` from the host inside ``node``'s network namespace."""
        return proc.in_netns(self.container(node), *cmd)


@dataclass(frozen=True)
class Fault:
    """One fault case: the field report it stands for, and how it is proven.

    ``id`` names the case (``F18`` for a field report of the catalogue's
    F-series, else a name such as ``busy-neighbour``); ``title`` says what
    is injected; ``report_kind`` the kind of field report it stands for
    (what people saw: "path MTU blackhole between nodes").  ``checks``
    selects the checks to run (pytest -k); ``must_fail`` lists test-id
    fragments that must fail; ``message`` is a regex (``{n0}``, ``{n1}``
    stand for the first and second node name, ``{user}`` for the training
    user) that the failure messages must match; ``must_skip`` lists test-id
    fragments that must be reported as not run (skipped), and ``must_pass``
    those that must still pass (judged on their own), and ``must_warn`` the
    property ids that must be flagged (verdict warn).
    """

    id: str
    title: str
    inject: Callable[[FaultContext], object]
    revert: Callable[[FaultContext], object]
    checks: str
    must_fail: tuple[str, ...]
    message: str
    #: The kind of field report the case stands for (what people saw).
    report_kind: str
    #: What was seen or measured of the fault by hand before the case
    #: existed, where that was recorded ("" otherwise).
    source: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    must_skip: tuple[str, ...] = ()
    must_pass: tuple[str, ...] = ()
    #: Property ids whose verdict must be "warn" (results.json of the checks).
    must_warn: tuple[str, ...] = ()
    #: Stops and starts nodes: runs only with --long-properties (tox -e
    #: availability), and its checks get --long-properties too.  It runs
    #: alone (see :attr:`alone`): its properties time recoveries against
    #: bounds calibrated on a quiet machine.
    long: bool = False
    #: Needs the profile's extra CA certificates on the controller (skipped without).
    requires_ca: bool = False
    #: Its checks measure or judge a figure that another load on the machine
    #: changes (throughput, efficiency, bandwidth, a scan's arrivals): it
    #: runs only where nothing else loads the machine (see :attr:`alone`).
    judges_figures: bool = False
    #: Reads back everything the fault changes ({what: reading}), before it
    #: is injected and after it is reverted: equal readings prove the revert
    #: undid it exactly.  Only then may a property that passed on this
    #: cluster earlier in the session stand for its measurement after the
    #: revert (:func:`after_revert`); None: every failed check runs again.
    state: Callable[[FaultContext], dict[str, str]] | None = None
    #: Further regexes (as :attr:`message`) that some failure must match
    #: too: each check that meets the fault quotes its cause.
    more_messages: tuple[str, ...] = ()

    def expected_message(self, ctx: FaultContext) -> str:
        return self.message.format(n0=ctx.node(0), n1=ctx.node(1), user=ctx.training_user)

    def expected_messages(self, ctx: FaultContext) -> list[str]:
        """:attr:`message` and :attr:`more_messages`, with the node names in."""
        return [m.format(n0=ctx.node(0), n1=ctx.node(1), user=ctx.training_user) for m in self.messages]

    @property
    def messages(self) -> tuple[str, ...]:
        """The message templates the failures must match: :attr:`message`,
        then :attr:`more_messages` (regexes with ``{n0}``, ``{n1}``, ``{user}``)."""
        return (self.message, *self.more_messages)

    @property
    def alone(self) -> bool:
        """Runs only on a machine nothing else loads: it judges a figure
        (images/sec, efficiency, busbw, a scan), or stops and starts nodes
        and times the recovery.  A busy machine delays a recovery past
        bounds calibrated on a quiet one: beside the fresh root, teardown
        and concurrency proofs, availability.kill_recovery_s measured 45.1 s
        against 30.2 alone (upper bound 40).  The others are judged by
        checks alone and may run beside other work (ci/test.sh's lanes)."""
        return self.judges_figures or self.long

    def read_state(self, ctx: FaultContext) -> dict[str, str] | None:
        """:attr:`state` read now, or None for a fault without one."""
        return self.state(ctx) if self.state is not None else None


#: The checks run after the revert of a fault whose properties are not
#: measured again: every node and cluster check (the main job's check
#: phase, pytest's -k matches the marker), so the nodes the fault stopped,
#: restarted or cut off are proven healthy as a whole; all but the two that
#: only read what is installed on disk (Horovod's check-build and Ansible's
#: become_user, 90 of the selection's 110 s on this machine), which neither
#: a stop, a start nor a partition changes and the state readings cover.
HEALTH_SELECTION = "check_phase and not test_horovod_build and not test_file_module_as_training_user"


def after_revert(failed: list[str], before: dict[str, str] | None, after: dict[str, str] | None,
                 passed_earlier: dict[str, str]) -> tuple[str, dict[str, str]]:
    """What runs after a fault's revert, and which failed properties are not
    measured again.

    ``failed`` are the test names that failed with the fault
    (``test_property[availability.recovery_s]``, ``test_node_count``);
    ``before``/``after`` the fault's state readings (None without
    :attr:`Fault.state`); ``passed_earlier`` maps property ids to the
    verdict they got on this cluster earlier in the session (pass or warn).
    Returns the pytest -k selection and {test name: why it stands}: a failed
    property stands when the revert restored the readings exactly and the
    property passed earlier, since the cluster is then in a state it was
    measured to pass in; the selection then adds :data:`HEALTH_SELECTION`
    to the failed checks.  Otherwise the selection is every failed test,
    as before.

    Raises:
        AssertionError: the readings after the revert differ from those
            before the fault (names what differs).
    """
    standing = {}
    if before is not None:
        after = after or {}
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        assert not changed, (
            "the revert did not restore what the fault changed: "
            + "; ".join(f"{k}: {before.get(k)!r} before, {after.get(k)!r} after" for k in changed))
        for name in failed:
            prop = property_id(name)
            if prop in passed_earlier:
                standing[name] = (f"{prop} passed (verdict {passed_earlier[prop]}) on this cluster earlier in the "
                                  "session, and the revert restored every reading of the fault's state")
    rest = [n for n in failed if n not in standing]
    if standing:
        return " or ".join([*rest, f"({HEALTH_SELECTION})"]), standing
    return " or ".join(rest), standing


def property_id(test_name: str) -> str:
    """``scaling.efficiency`` for ``test_property[scaling.efficiency]``; "" for other tests."""
    match = re.fullmatch(r"test_property\[(.+)\]", test_name)
    return match.group(1) if match else ""


def files_state(*paths: str, node: int | None = None):
    """State: mode, owner and sha256 of each of ``paths`` on node ``node``
    (index; None: every node), read out of band ("absent" for a missing file)."""
    def read(ctx: FaultContext) -> dict[str, str]:
        names = ctx.contract.node_names if node is None else [ctx.node(node)]
        out = {}
        for name in names:
            for path in paths:
                r = ctx.sh(name, f"if [ -e {path} ]; then stat -c '%a %u:%g' {path} && sha256sum < {path}; "
                                 "else echo absent; fi")
                out[f"{name}:{path}"] = " ".join(r.stdout.split())
        return out
    return read


def overrides_state(ctx: FaultContext) -> dict[str, str]:
    """State: the profile overrides the run's checks read (run.json)."""
    return {"overrides": json.dumps(RunDir.open(ctx.run_id).read_meta().get("overrides", {}), sort_keys=True)}


def driver_state(ctx: FaultContext) -> dict[str, str]:
    """State: the cloud driver the checks' child pytest gets."""
    return {FAULT_DRIVER_ENV: os.environ.get(FAULT_DRIVER_ENV, "")}


def states(*readers):
    """State: the union of ``readers``' readings."""
    def read(ctx: FaultContext) -> dict[str, str]:
        out: dict[str, str] = {}
        for reader in readers:
            out.update(reader(ctx))
        return out
    return read


def backup(path: str) -> str:
    return f"cp -p {path} {path}.refarch-fault"


def restore(path: str) -> str:
    return f"mv -f {path}.refarch-fault {path}"


def neighbour_state(ctx: FaultContext) -> dict[str, str]:
    """State: how many busy loops of refarch.judge.neighbour run on the first node."""
    r = ctx.sh(ctx.node(0), f"pgrep -c -f '{neighbour.mark_pattern()}' || true")
    return {f"{ctx.node(0)}: busy loops": r.stdout.strip() or "0"}


def firewall_state(ctx: FaultContext) -> dict[str, str]:
    """State: the whole nftables ruleset of the second node's network
    namespace (F2's firewall lives there)."""
    r = ctx.netns(ctx.node(1), "nft", "list", "ruleset")
    return {f"{ctx.node(1)}: nft list ruleset": r.stdout.strip()}


def mount_state(ctx: FaultContext) -> dict[str, str]:
    """State: what is mounted at /shared on the second node, and how."""
    r = ctx.sh(ctx.node(1), "findmnt -n -o SOURCE,FSTYPE /shared || echo 'not mounted'")
    return {f"{ctx.node(1)}: /shared": r.stdout.strip()}


def home_state(ctx: FaultContext) -> dict[str, str]:
    """State: mode and owner of the training user's home on the second node."""
    r = ctx.sh(ctx.node(1), f"stat -c '%a %U:%G' /home/{ctx.training_user}")
    return {f"{ctx.node(1)}: /home/{ctx.training_user}": r.stdout.strip()}

