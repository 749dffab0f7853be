"""Communication: Horovod's allreduce against the raw network between node
pairs (the ``communication`` section says which pairs and sizes).

The jobs are iperf3 and ``allreduce_bench.py`` per pair (fixture
``communication_runs``, refarch.pytest.workloads).
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field

from .base import Group, Measurement, Property, Strict, across_nodes


class Communication(Strict):
    """The communication measurement between pairs of nodes (``pairs``:
    every pair, N(N-1)/2 of them, or a ring, each node and the next: N):
    raw TCP for ``tcp_seconds`` (iperf3), then Horovod allreduce at each
    size in ``sizes_mib`` (MiB), ``warmup`` untimed and ``iterations`` timed."""

    pairs: Literal["all", "ring"] = "all"
    """Which node pairs are measured: ``all`` (every pair, N(N-1)/2) or ``ring`` (each node and the next, N)."""
    tcp_seconds: int = Field(3, ge=1, le=60)
    """Seconds of raw TCP (iperf3 -t) per node pair, the denominator of communication.busbw_to_tcp."""
    sizes_mib: list[float] = Field([1, 16, 64], min_length=1)
    """Allreduce message sizes in MiB (allreduce_bench.py --sizes-mib); the largest one is judged."""
    warmup: int = Field(2, ge=0)
    """Untimed allreduces per message size before the timed ones (allreduce_bench.py --warmup)."""
    iterations: int = Field(5, ge=1)
    """Timed allreduces per message size (allreduce_bench.py --iterations)."""


def node_pairs(names: list[str], kind: str) -> list[tuple[str, str]]:
    """The pairs the communication measurement takes: ``all`` (every pair,
    in order) or ``ring`` (each node and the next, the last and the first;
    one pair for two nodes)."""
    if len(names) < 2:
        return []
    if kind == "ring":
        ring = [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]
        return ring[:1] if len(names) == 2 else ring
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def busbw_to_tcp(request) -> Measurement:
    """communication.busbw_to_tcp: the worst pair's ratio at the largest
    size; fails naming each pair that could not be measured."""
    across_nodes(request)
    pairs = request.getfixturevalue("communication_runs")
    errors = [p["error"] for p in pairs if "error" in p]
    if errors:
        pytest.fail("node pairs not measured: " + "; ".join(errors))
    worst = min(pairs, key=lambda p: p["sizes"][-1]["busbw_to_tcp"])
    last = worst["sizes"][-1]
    detail = (f" ({'-'.join(worst['pair'])}: allreduce busbw {last['busbw_Bps'] / 1e9:.2f} GB/s at "
              f"{last['bytes'] / (1 << 20):g} MiB, raw TCP {worst['tcp_Bps'] / 1e9:.2f} GB/s)")
    return Measurement(last["busbw_to_tcp"], {"pairs": pairs}, detail)


GROUP = Group("communication", section=("communication", Communication), properties=(
    Property("busbw_to_tcp", "ratio",
             "lowest over node pairs of Horovod's allreduce bus bandwidth at the largest message size divided by "
             "raw TCP throughput between the same pair (iperf3)", busbw_to_tcp),
))
