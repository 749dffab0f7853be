"""Packet counters that prove an exposure probe's packets arrived
(:mod:`refarch.clouds.exposure`): nftables counters on this host, per probe
and destination node, before the run's network policy judges the packets
(the edge), and inside each node's network namespace, after every other
input filter, per probe and listening port (the arrival).  A port whose
arrival counter is above 0 was reachable, whether or not its service
answered the probe.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .exposure import Probe

#: nftables table of the arrival counters inside each node's namespace.
ARRIVAL_TABLE = "refarch_arrivals"


def edge_table(policy_table: str) -> str:
    """This host's per-destination counters of a run: beside its policy
    table, found and removed by the run's sweep with it."""
    return f"{policy_table}_probes"


def _counter_rules(items: list[tuple[str, str]]) -> str:
    return "\n".join(f"        {match} counter comment \"{comment}\"" for match, comment in items)


def arrival_ruleset(table: str, probes: list[Probe], ports: list[str]) -> str:
    """nftables ruleset (for ``nft -f -``) of a node's arrival counters: in
    the node's own network namespace, after every other input filter
    (priority 300), one counter per probe for all its packets ("admin all")
    and one per probe and listening port ("outside udp/111").  Only packets
    the run's network policy and the node's own filters let through get
    here: what reaches the node's sockets."""
    items = []
    for probe in probes:
        for port in ports:
            proto, number = port.split("/")
            items.append((f"ip saddr {probe.address} {proto} dport {number}", f"{probe.kind} {port}"))
        items.append((f"ip saddr {probe.address}", f"{probe.kind} all"))
    return (f"table inet {table} {{\n    chain input {{\n        type filter hook input priority 300; "
            f"policy accept;\n{_counter_rules(items)}\n    }}\n}}\n")


def edge_ruleset(table: str, probes: list[Probe], nodes: dict[str, str]) -> str:
    """nftables ruleset of this host's per-destination counters: before the
    run's network policy judges them, the packets each probe sent towards
    each node ("outside node2"; ``nodes``: address -> name)."""
    items = [(f"ip saddr {probe.address} ip daddr {address}", f"{probe.kind} {name}")
             for probe in probes for address, name in sorted(nodes.items())]
    return (f"table inet {table} {{\n    chain forward {{\n        type filter hook forward priority -300; "
            f"policy accept;\n{_counter_rules(items)}\n    }}\n}}\n")


def read_counters(nft_json: str) -> dict[str, int]:
    """``nft -j list table ...`` -> {rule comment: packets}."""
    out = {}
    for item in json.loads(nft_json).get("nftables", []):
        rule = item.get("rule")
        if rule and rule.get("comment"):
            for expr in rule.get("expr", []):
                if "counter" in expr:
                    out[rule["comment"]] = expr["counter"]["packets"]
    return out


def exposed_by_arrival(listening: list[str], counters: dict[str, int], kind: str) -> list[str]:
    """The listening ports (``listening``: "udp/111") that ``kind``'s
    packets reached (their node-side counter is above 0): reachable by the
    probe whether or not the service answered it (a silent UDP service
    looks "open|filtered" to nmap)."""
    return [port for port in listening if counters.get(f"{kind} {port}", 0) > 0]
