"""Availability: a node that fails comes back healthy, and elastic Horovod
trains through its loss and its return (the ``availability`` section sets
the failure modes and the elastic job's pace).

The jobs are a node's restart (fixture ``restart_run``,
refarch.pytest.availability) and one elastic job per failure mode
(``elastic_runs``, refarch.pytest.elastic).  The group stops and starts
nodes, so it runs only with pytest --long-properties (tox -e availability).
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field

from .base import Group, Measurement, Property, Strict, across_nodes


class Availability(Strict):
    """The availability measurements (tox -e availability): the node fails
    in each of ``failure_modes`` in turn (one elastic job each); the elastic
    job commits every ``commit_every`` steps and sleeps ``step_sleep_s`` per
    step; time limits in seconds for a node to be healthy after its start,
    for the job to reach each expected world size, and for the whole job."""

    failure_modes: list[Literal["stop", "kill", "partition"]] = Field(
        ["stop", "kill", "partition"], min_length=1,
        description="how the node fails in the elastic job (refarch.clouds.drivers.FAILURE_MODES): each mode listed "
                    "is measured by its own recovery and rejoin properties")
    commit_every: int = Field(10, ge=1)
    """Steps between two commits of the elastic job's state (elastic_train.py --commit-every)."""
    step_sleep_s: float = Field(0.1, ge=0)
    """Seconds the elastic job sleeps per step (elastic_train.py --step-sleep), which sets its pace."""
    restart_timeout_s: int = Field(300, ge=10)
    """Seconds a node restarted or restored may take to be healthy again (SSH, the share, the clock)."""
    step_timeout_s: int = Field(240, ge=10)
    """Seconds the elastic job may take to reach each expected world size (N, N-1 after the failure, N again)."""
    job_timeout_s: int = Field(900, ge=60)
    """Seconds the whole elastic job of one failure mode may run."""


def restart_healthy(request) -> Measurement:
    """availability.restart_healthy_s; fails when no node check passed after
    the restart, or one failed (nothing proves the node works again)."""
    run = request.getfixturevalue("restart_run")
    if not run.get("checks_passed"):
        pytest.fail(f"{run['node']} healthy after {run['healthy_s']} s, but no check passed after its restart "
                    f"({run['checks_run']} run): nothing proves it works again")
    if run["failed"]:
        pytest.fail(f"{run['node']} healthy after {run['healthy_s']} s, but checks fail after its restart "
                    "(without Ansible): " + "; ".join(f"{t}: {m}" for t, m in sorted(run["failed"].items())))
    return Measurement(run["healthy_s"], run, f" ({run['node']} down {run['down_after_stop_s']} s after the stop; "
                                              f"then {run['checks_passed']} checks passed)")


def elastic_run(request, mode: str = "stop") -> dict:
    """The elastic job of failure ``mode``; skips a mode the profile does
    not list."""
    across_nodes(request)
    modes = request.getfixturevalue("profile").availability.failure_modes
    if mode not in modes:
        pytest.skip(f"failure mode {mode} not in availability.failure_modes ({', '.join(modes)})")
    return request.getfixturevalue("elastic_runs")(mode)


def recovery_of(mode: str):
    """The measurement of ``availability.<mode>recovery_s``."""
    def measure(request) -> Measurement:
        run = elastic_run(request, mode)
        how = {"stop": "stopped", "kill": "killed", "partition": "cut off"}[mode]
        gloo = f"; the survivors' Gloo timeout {run['gloo_timeout_s']:g} s" if run.get("gloo_timeout_s") else ""
        return Measurement(run["recovery_s"], run, f" ({run['victim']} {how} while listed; world sizes "
                                                   f"{run['world_sizes']}; seen: {run['failure_seen'][0]}{gloo})")
    return measure


def rejoin_of(mode: str):
    """The measurement of ``availability.<mode>rejoin_s``."""
    def measure(request) -> Measurement:
        run = elastic_run(request, mode)
        if run["rejoin_s"] is None:
            pytest.fail(run["rejoin_error"])
        back = "healthy again" if mode != "partition" else "reconnected and healthy"
        return Measurement(run["rejoin_s"], run, f" ({run['victim']} {back}, listed throughout; world sizes "
                                                 f"{run['world_sizes']})")
    return measure


def repeated(request) -> Measurement:
    """availability.steps_repeated of the stop job, with each reset."""
    run = elastic_run(request)
    every = request.getfixturevalue("profile").availability.commit_every
    resets = "; ".join(f"rank 0 went back from step {high} to {back}" for high, back in run.get("step_resets", []))
    return Measurement(run["steps_repeated"], run, f" (commit every {every} steps{'; ' + resets if resets else ''})")


_SECONDS_TO_N_1 = "to the first training step at N-1"
GROUP = Group("availability", section=("availability", Availability), long=True, properties=(
    Property("restart_healthy_s", "seconds",
             "a node stopped (proven down) and started by the cloud: seconds from its start until SSH, the shared "
             "storage and the clock are healthy (its node checks must then pass without Ansible)", restart_healthy),
    Property("recovery_s", "seconds",
             "elastic Horovod: seconds from stopping a worker node that stays listed (a failure, proven: the cloud "
             "says stopped, a peer gets no answer, the job printed the worker's failure) " + _SECONDS_TO_N_1,
             recovery_of("stop")),
    Property("rejoin_s", "seconds",
             "elastic Horovod: seconds from the stopped node being healthy again (listed throughout) to the first "
             "step at N", rejoin_of("stop")),
    Property("kill_recovery_s", "seconds",
             "elastic Horovod: seconds from killing a worker node that stays listed (hard power-off: nothing shut "
             "down, no connection closed; proven: the cloud says stopped, a peer gets no answer) " + _SECONDS_TO_N_1,
             recovery_of("kill")),
    Property("kill_rejoin_s", "seconds",
             "elastic Horovod: seconds from the killed node being healthy again to the first step at N",
             rejoin_of("kill")),
    Property("partition_recovery_s", "seconds",
             "elastic Horovod: seconds from cutting a worker node off the network (every packet in and out "
             "dropped; proven: a peer gets no answer while the cloud says it runs) " + _SECONDS_TO_N_1,
             recovery_of("partition")),
    Property("partition_rejoin_s", "seconds",
             "elastic Horovod: seconds from the partition healed and the node healthy to the first step at N",
             rejoin_of("partition")),
    Property("steps_repeated", "steps",
             "elastic Horovod: the most steps trained twice after a reset (restored from the last commit)", repeated),
))

#: Failure mode (refarch.clouds.drivers.FAILURE_MODES) of each availability
#: property measured by an elastic job.
FAILURE_MODE_OF = {"availability.recovery_s": "stop", "availability.rejoin_s": "stop",
                   "availability.steps_repeated": "stop",
                   "availability.kill_recovery_s": "kill", "availability.kill_rejoin_s": "kill",
                   "availability.partition_recovery_s": "partition", "availability.partition_rejoin_s": "partition"}
