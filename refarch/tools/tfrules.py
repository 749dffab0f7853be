"""Policies that checkov's per-rule checks miss, read from a root module with
python-hcl2: security groups judged by what their address ranges cover
(F15) and outputs judged by where their values come from (F16).

Security groups:

checkov's rules look at one rule at a time and at the text of its source
prefix, so two rules admitting 0.0.0.0/1 and 128.0.0.0/1 pass although
together they admit the whole IPv4 internet.  Here a root module's
``openstack_networking_secgroup_rule_v2`` resources are read with
python-hcl2, grouped by security group, and the union of each group's
ingress ranges is compared with what the architecture allows:

* ports other than SSH: only the cluster network (``var.subnet_cidr``) or
  the group's own members (``remote_group_id``);
* SSH (22/tcp): additionally ``var.admin_cidr`` (whose own validation
  rejects 0.0.0.0/0).

A rule with no ``remote_ip_prefix`` and no ``remote_group_id`` admits every
source of its ethertype (OpenStack's reading): 0.0.0.0/0, or ::/0 for
``ethertype = "IPv6"``.

Both address families are judged (faults F15 and F21): the union
of a group's IPv4 prefixes and that of its IPv6 prefixes are each compared
with the cluster network, and a union is called the whole internet of its
family when it covers every routable address (:data:`ROUTABLE`), not only
when it is 0.0.0.0/0 or ::/0: ``::/1`` with ``8000::/1``, or IPv4 prefixes
that leave out only multicast and the reserved block, are the internet.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

import hcl2

RULE = "openstack_networking_secgroup_rule_v2"
WORLD = ipaddress.ip_network("0.0.0.0/0")
WORLD6 = ipaddress.ip_network("::/0")
#: Addresses no internet host has (IANA's IPv4 Special-Purpose Address
#: Registry, RFC 6890 and its updates; multicast RFC 5771; reserved RFC 1112).
NOT_ROUTABLE4 = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",
    "240.0.0.0/4")]


def uncovered(targets, nets) -> list:
    """The parts of the networks ``targets`` that no network of ``nets``
    (one address family) covers, as a list of networks."""
    left = list(targets)
    for net in nets:
        rest = []
        for target in left:
            if target.version != net.version or not target.overlaps(net):
                rest.append(target)
            elif not target.subnet_of(net):  # net lies inside target: keep what is around it
                rest.extend(target.address_exclude(net))
        left = rest
    return left


#: Every routable address, per family: IPv4 less :data:`NOT_ROUTABLE4`;
#: IPv6's global unicast 2000::/3 (RFC 4291, IANA's IPv6 Address Space)
#: less the documentation prefix 2001:db8::/32 (RFC 3849).
ROUTABLE = {4: uncovered([WORLD], NOT_ROUTABLE4),
            6: uncovered([ipaddress.ip_network("2000::/3")], [ipaddress.ip_network("2001:db8::/32")])}


def _unquote(value):
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@dataclass(frozen=True)
class IngressRule:
    """One ingress rule: its address, group, ports and source."""

    address: str
    group: str
    ports: tuple[int, int]
    protocol: str
    source: str  # a CIDR, a ``${var.x}`` reference, ``group`` or ``any``
    ethertype: str = "IPv4"


def _documents(module_dir: Path) -> list[dict]:
    """Every ``*.tf`` file of ``module_dir`` parsed with python-hcl2."""
    docs = []
    for tf in sorted(module_dir.glob("*.tf")):
        with open(tf, encoding="utf-8") as fh:
            docs.append(hcl2.load(fh))
    return docs


def _blocks(docs: list[dict], kind: str) -> dict[str, dict]:
    """Name -> attributes of every ``kind`` block (output, variable, locals)."""
    found: dict[str, dict] = {}
    for doc in docs:
        for block in doc.get(kind, []):
            found.update({_unquote(k): v for k, v in block.items() if not k.startswith("__")})
    return found


def ingress_rules(docs: list[dict]) -> list[IngressRule]:
    """The ingress rules of a module's parsed files (:func:`_documents`)."""
    rules = []
    for doc in docs:
        for block in doc.get("resource", []):
            for rtype, named in block.items():
                if _unquote(rtype) != RULE:
                    continue
                for name, attrs in named.items():
                    attrs = {k: _unquote(v) for k, v in attrs.items()}
                    if attrs.get("direction") != "ingress":
                        continue
                    lo = int(attrs.get("port_range_min") or 1)
                    hi = int(attrs.get("port_range_max") or 65535)
                    if attrs.get("remote_group_id"):
                        source = "group"
                    else:
                        source = attrs.get("remote_ip_prefix") or "any"
                    rules.append(IngressRule(f"{RULE}.{_unquote(name)}", str(attrs.get("security_group_id")),
                                             (lo, hi), str(attrs.get("protocol") or "any"), source,
                                             str(attrs.get("ethertype") or "IPv4")))
    return rules


def _network(source: str, ethertype: str = "IPv4"):
    """The network a literal source admits; None for the group's members.
    No source, or a variable reference other than the allowed ones
    (filtered out before), admits the whole of the rule's ethertype."""
    if source == "group":
        return None
    if source == "any" or (source.startswith("${var.") and source.endswith("}")):
        return WORLD6 if ethertype == "IPv6" else WORLD  # an unknown variable could hold anything
    return ipaddress.ip_network(source, strict=False)


def findings(module_dir: Path, cluster_cidr: str | None = None) -> list[str]:
    """One line per security group whose ingress ranges, taken together,
    admit more than the architecture allows; empty when the module passes.

    ``cluster_cidr`` defaults to ``var.subnet_cidr``'s default in the module
    (10.42.0.0/24 in descriptors/terraform/openstack).
    """
    docs = _documents(module_dir)
    rules = ingress_rules(docs)
    allowed_refs = {"${var.subnet_cidr}"}
    ssh_refs = allowed_refs | {"${var.admin_cidr}"}
    default = _unquote(_blocks(docs, "variable").get("subnet_cidr", {}).get("default"))
    cluster = ipaddress.ip_network(cluster_cidr or default or "10.42.0.0/24")
    out = []
    for group in sorted({r.group for r in rules}):
        mine = [r for r in rules if r.group == group]
        for label, pick, refs in (("non-SSH ports", lambda r: r.ports != (22, 22), allowed_refs),
                                  ("SSH", lambda r: r.ports[0] <= 22 <= r.ports[1], ssh_refs)):
            admitted = [(r, _network(r.source, r.ethertype)) for r in mine if pick(r) and r.source not in refs]
            for family in (4, 6):
                of_family = [(r, n) for r, n in admitted if n is not None and n.version == family]
                union = list(ipaddress.collapse_addresses(n for _, n in of_family))
                outside = [n for n in union if n.version != cluster.version or not n.subnet_of(cluster)]
                if not outside:
                    continue
                sources = ", ".join(f"{r.source} ({r.address}, {r.protocol} {r.ports[0]}-{r.ports[1]})"
                                    for r, _ in of_family)
                whole = f" = the whole IPv{family} internet" if not uncovered(ROUTABLE[family], union) else ""
                out.append(f"security group {group}: {label} admit {', '.join(map(str, union))}{whole} "
                           f"from {sources}; allowed: the cluster network {cluster}"
                           + (" or var.admin_cidr" if label == "SSH" else "") + " or the group's members")
    return out


#: Attributes whose value is a secret (a private key, a generated password).
SECRET_ATTRIBUTES = {
    "tls_private_key": ("private_key_openssh", "private_key_pem", "private_key_pem_pkcs8"),
    "random_password": ("result", "bcrypt_hash"),
    "openstack_identity_application_credential_v3": ("secret",),
}
_REF = re.compile(r"\b(local|var)\.([A-Za-z_][A-Za-z0-9_-]*)")


def secret_outputs(module_dir: Path) -> list[str]:
    """One line per output that carries a secret without ``sensitive = true``
    (F16).  A value is followed through locals (transitively) to
    where it comes from: a secret attribute of a resource
    (:data:`SECRET_ATTRIBUTES`) or a variable marked sensitive."""
    docs = _documents(module_dir)
    outputs = _blocks(docs, "output")
    local_values = _blocks(docs, "locals")
    sensitive_vars = {n for n, v in _blocks(docs, "variable").items() if v.get("sensitive") is True}
    secret_refs = [re.compile(rf"\b{t}\.[A-Za-z0-9_-]+(\[[^\]]*\])?\.{a}\b")
                   for t, attrs in SECRET_ATTRIBUTES.items() for a in attrs]
    out = []
    for name, body in outputs.items():
        if body.get("sensitive") is True:
            continue
        seen: set[str] = set()
        todo = [("", str(body.get("value")))]
        while todo:
            via, text = todo.pop()
            origin = next((m.group(0) for p in secret_refs if (m := p.search(text))), None)
            if origin is None:
                origin = next((f"var.{m.group(2)}" for m in _REF.finditer(text)
                               if m.group(1) == "var" and m.group(2) in sensitive_vars), None)
            if origin:
                out.append(f"output {name} carries the secret {origin}{via} without sensitive = true")
                break
            for m in _REF.finditer(text):
                if m.group(1) == "local" and m.group(2) in local_values and m.group(2) not in seen:
                    seen.add(m.group(2))
                    todo.append((f"{via} through local.{m.group(2)}", str(local_values[m.group(2)])))
    return out
