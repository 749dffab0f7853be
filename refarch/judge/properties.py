"""Non-functional properties: what each one measures, and how a measured
value is judged against the profile's reference.

A profile's ``properties:`` section holds, per property id (``group.name``,
e.g. ``scaling.efficiency``), the unit, the reference (target, lower and/or
upper bound, optional warning band) and its source.  References with
tolerances kept as data follow ReFrame's performance references
(https://reframe-hpc.readthedocs.io/en/stable/tutorial.html, "reference"
tuples of target, lower and upper threshold per system).  The tests in
``tests/integration/test_properties.py`` measure each property (one JUnit
test per id, ``test_property[scaling.efficiency]``) and judge it here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Property id -> (unit, what is measured).  A profile may only name these.
KNOWN: dict[str, tuple[str, str]] = {
    "scaling.efficiency": (
        "ratio", "throughput(N) / (N x throughput(1)) of the synthetic benchmark, one rank per node "
                 "(median images/sec of the steps, smoke batch size; np=1 timed in rounds beside np=N); an "
                 "error when any world size gives more than 1, an interval too wide, or np=1 alone and in "
                 "rounds disagree"),
    "convergence.test_accuracy": (
        "ratio", "held-out accuracy on scikit-learn's digits after the distributed training at np=N"),
    "convergence.ranks_diverged": (
        "ranks", "ranks whose weights after training differ (sha256 of the float32 bytes) from rank 0's"),
    "convergence.loss_gap": (
        "ratio", "|train loss(np=N) - train loss(np=1)| / train loss(np=1) after the same number of steps"),
    "communication.busbw_to_tcp": (
        "ratio", "lowest over node pairs of Horovod's allreduce bus bandwidth at the largest message size "
                 "divided by raw TCP throughput between the same pair (iperf3)"),
    "availability.restart_healthy_s": (
        "seconds", "a node stopped (proven down) and started by the cloud: seconds from its start until SSH, "
                   "the shared storage and the clock are healthy (its node checks must then pass without Ansible)"),
    "availability.recovery_s": (
        "seconds", "elastic Horovod: seconds from stopping a worker node that stays listed (a failure, proven: "
                   "the cloud says stopped, a peer gets no answer, the job printed the worker's failure) to "
                   "the first training step at N-1"),
    "availability.rejoin_s": (
        "seconds", "elastic Horovod: seconds from the stopped node being healthy again (listed throughout) to "
                   "the first step at N"),
    "availability.kill_recovery_s": (
        "seconds", "elastic Horovod: seconds from killing a worker node that stays listed (hard power-off: "
                   "nothing shut down, no connection closed; proven: the cloud says stopped, a peer gets no answer) "
                   "to the first training step at N-1"),
    "availability.kill_rejoin_s": (
        "seconds", "elastic Horovod: seconds from the killed node being healthy again to the first step at N"),
    "availability.partition_recovery_s": (
        "seconds", "elastic Horovod: seconds from cutting a worker node off the network (every packet in and "
                   "out dropped; proven: a peer gets no answer while the cloud says it runs) to the first "
                   "training step at N-1"),
    "availability.partition_rejoin_s": (
        "seconds", "elastic Horovod: seconds from the partition healed and the node healthy to the first step "
                   "at N"),
    "availability.steps_repeated": (
        "steps", "elastic Horovod: the most steps trained twice after a reset (restored from the last commit)"),
    "exposure.outside_open_ports": (
        "ports", "ports open on any node to a probe outside the admin range and the cluster, beyond "
                 "expect.exposure.outside (nmap: TCP 1-65535, UDP to every port a node listens on and nmap's 20 "
                 "most frequent; a listening port the probe's packets reached counts as open)"),
    "exposure.admin_unexpected_ports": (
        "ports", "ports open on any node to a probe in the admin range beyond expect.exposure.admin"),
    "exposure.password_auth_nodes": (
        "nodes", "nodes whose sshd offers password or keyboard-interactive login (nmap ssh-auth-methods)"),
}


#: Failure mode (refarch.clouds.drivers.FAILURE_MODES) of each availability
#: property measured by an elastic job.
FAILURE_MODE_OF = {"availability.recovery_s": "stop", "availability.rejoin_s": "stop",
                   "availability.steps_repeated": "stop",
                   "availability.kill_recovery_s": "kill", "availability.kill_rejoin_s": "kill",
                   "availability.partition_recovery_s": "partition", "availability.partition_rejoin_s": "partition"}

#: Property groups that stop and start nodes: measured only when asked for
#: (pytest --long-properties; tox -e availability), skipped with that reason
#: otherwise.
LONG_GROUPS = ("availability",)


@dataclass(frozen=True)
class Verdict:
    """``status`` is pass, warn, fail or error (no finite figure);
    ``message`` names the figure, the bound it crossed and the reference's
    source."""

    status: str
    message: str


@dataclass
class Measurement:
    """One measured value (in the property's unit) and where it came from
    (``evidence``: run, world sizes, log files), plus optional detail for
    the message (e.g. which ranks differ) and, for a figure that cannot be
    judged, the reason (``error``)."""

    value: float
    evidence: dict = field(default_factory=dict)
    detail: str = ""
    #: Why the figure, though measured, cannot be judged (e.g. an
    #: efficiency above 1 at some world size): the verdict is then error.
    error: str = ""


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def is_finite_number(value) -> bool:
    """True for an int or float (not bool) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def judge(prop_id: str, value: float, spec, detail: str = "", error: str = "") -> Verdict:
    """Judge ``value`` against ``spec`` (a :class:`refarch.profile.PropertySpec`).

    Fails below ``reference.lower`` or above ``reference.upper``; warns below
    ``warn_below``, or above ``warn_above`` (a figure far better than the
    reference is suspicious: e.g. ranks that do not exchange gradients scale
    "too well").  The message names the property, the figure with its unit,
    the bound, the target and the source; ``detail`` (e.g. " (np=1 37.2,
    np=2 41.0 images/sec)") follows the figure.

    A figure that is missing or not finite (None, NaN, infinity: every
    comparison with NaN is false, so it would pass every bound) is an
    ``error`` verdict: the property was not measured.  So is a figure with
    an ``error`` (why it cannot be judged, see :class:`Measurement`).
    """
    ref, unit = spec.reference, spec.unit
    if error:
        shown = _fmt(value) if is_finite_number(value) else repr(value)
        return Verdict("error", f"{prop_id} = {shown} {unit}{detail} cannot be judged (an error, never a pass): "
                                f"{error}")
    if not is_finite_number(value):
        return Verdict("error", f"{prop_id} = {value!r} {unit}{detail}: not a finite figure, so nothing was "
                                "measured (an error, never a pass)")
    figure = f"{prop_id} = {_fmt(value)} {unit}{detail}"
    context = []
    if ref.target is not None:
        context.append(f"target {_fmt(ref.target)}")
    source = f"source: {spec.source.text}" + (f" <{spec.source.url}>" if spec.source.url else "")
    tail = f" ({'; '.join([*context, source])})"
    if ref.lower is not None and value < ref.lower:
        return Verdict("fail", f"{figure} is below the lower bound {_fmt(ref.lower)}{tail}")
    if ref.upper is not None and value > ref.upper:
        return Verdict("fail", f"{figure} is above the upper bound {_fmt(ref.upper)}{tail}")
    if ref.warn_below is not None and value < ref.warn_below:
        return Verdict("warn", f"{figure} is in the warning band (below {_fmt(ref.warn_below)}){tail}")
    if ref.warn_above is not None and value > ref.warn_above:
        return Verdict("warn", f"{figure} is suspiciously far above the reference (warn above "
                               f"{_fmt(ref.warn_above)}): check that the ranks really work together{tail}")
    bounds = [f"lower {_fmt(ref.lower)}"] if ref.lower is not None else []
    bounds += [f"upper {_fmt(ref.upper)}"] if ref.upper is not None else []
    return Verdict("pass", f"{figure} is within the reference ({', '.join(bounds)}){tail}")


def scaling_efficiency(throughput_n: float, throughput_1: float, world_size: int) -> float:
    """throughput(N) / (N x throughput(1)); throughputs in images/sec.

    Source: the usual weak-scaling definition used by the Horovod paper
    (Sergeev & Del Balso 2018, arXiv:1802.05799).

    Raises:
        ValueError: a throughput is not positive or ``world_size`` < 1.
    """
    if throughput_1 <= 0 or throughput_n <= 0:
        raise ValueError(f"throughputs must be positive (np=1: {throughput_1}, np={world_size}: {throughput_n})")
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    return throughput_n / (world_size * throughput_1)


def diverged_ranks(hashes: list[str]) -> list[int]:
    """Ranks whose weight hash differs from rank 0's (``hashes[r]`` is
    rank r's sha256)."""
    return [rank for rank, digest in enumerate(hashes) if digest != hashes[0]]


def loss_gap(loss_n: float, loss_1: float) -> float:
    """|loss_n - loss_1| / loss_1 (cross-entropy, unitless).

    Raises:
        ValueError: ``loss_1`` is not positive.
    """
    if loss_1 <= 0:
        raise ValueError(f"np=1 loss {loss_1} is not positive")
    return abs(loss_n - loss_1) / loss_1
