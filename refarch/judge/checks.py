"""Parsing and judging what the node and cluster checks collect.

Pure functions, unit-tested offline on recorded outputs; the tests in
``tests/integration`` feed them what testinfra reads from the nodes.
"""

from __future__ import annotations

import re
from collections import Counter


# sshd -------------------------------------------------------------------------
def parse_sshd_t(text: str) -> dict[str, list[str]]:
    """``sshd -T`` output -> {lower-case keyword: [values in order]}."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if parts:
            settings.setdefault(parts[0].lower(), []).append(parts[1] if len(parts) > 1 else "")
    return settings


def sshd_violations(effective: dict[str, list[str]], expected: dict[str, str | list[str]]) -> list[str]:
    """Each expected setting that the effective configuration breaks, as
    ``"passwordauthentication is 'yes', expected 'no'"``.  An expected list
    means any of its values is fine."""
    problems = []
    for key, want in sorted(expected.items()):
        allowed = [want] if isinstance(want, str) else list(want)
        have = effective.get(key.lower())
        if not have:
            problems.append(f"{key} is not set, expected {' or '.join(map(repr, allowed))}")
        elif have[0] not in allowed:
            problems.append(f"{key} is {have[0]!r}, expected {' or '.join(map(repr, allowed))}")
    return problems


# horovodrun --check-build ---------------------------------------------------
def parse_check_build(text: str) -> dict[str, list[str]]:
    """``horovodrun --check-build`` -> {"version": [v], "frameworks": [...],
    "controllers": [...], "tensor_operations": [...]} listing what is
    built in (``[X]``)."""
    result: dict[str, list[str]] = {"version": [], "frameworks": [], "controllers": [], "tensor_operations": []}
    section = None
    for line in text.splitlines():
        m = re.match(r"\s*Horovod v(\S+):", line)
        if m:
            result["version"] = [m.group(1)]
            continue
        m = re.match(r"\s*Available (Frameworks|Controllers|Tensor Operations):", line)
        if m:
            section = m.group(1).lower().replace(" ", "_")
            continue
        m = re.match(r"\s*\[([ X])\]\s+(\S.*?)\s*$", line)
        if m and section and m.group(1) == "X":
            result[section].append(m.group(2))
    return result


def missing_build_features(built: dict[str, list[str]], frameworks: list[str], controllers: list[str]) -> list[str]:
    """What the profile asks for that ``--check-build`` does not list."""
    missing = [f"framework {f}" for f in frameworks if f not in built.get("frameworks", [])]
    missing += [f"controller {c}" for c in controllers if c not in built.get("controllers", [])]
    return missing


# Cluster-wide consistency -------------------------------------------------------
def duplicated(values: dict[str, str]) -> dict[str, list[str]]:
    """{node: value} -> {value: [nodes]} for every value held by 2+ nodes."""
    counts = Counter(values.values())
    return {v: sorted(n for n, x in values.items() if x == v) for v, c in counts.items() if c > 1}


def inconsistent(values: dict[str, str]) -> bool:
    """True when the nodes do not all report the same value."""
    return len(set(values.values())) > 1


# Training output -----------------------------------------------------------------
def tagged(output: str, tag: str) -> list[dict]:
    """The JSON objects of the workloads' ``<tag> {json}`` lines in
    ``output``, in order (``REFARCH_STEP`` per step, ``REFARCH_RESULT``;
    horovodrun may prefix a line with ``[0]<stdout>:``)."""
    import json

    marker = f"{tag} "
    return [json.loads(line[line.find(marker) + len(marker):]) for line in output.splitlines() if marker in line]


def parse_training_result(output: str) -> dict:
    """The (last) ``REFARCH_RESULT {json}`` line of the benchmark's output.

    Raises:
        ValueError: no such line (the job did not finish).
    """
    found = tagged(output, "REFARCH_RESULT")
    if found:
        return found[-1]
    raise ValueError("the training job printed no REFARCH_RESULT line")


# Time --------------------------------------------------------------------------------
def parse_chrony_tracking(text: str) -> dict[str, str]:
    """``chronyc -n tracking`` -> {field name: value}."""
    out = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            out[key.strip()] = value.strip()
    return out


def chrony_problems(tracking: dict[str, str], max_offset_ms: float) -> list[str]:
    """Unsynchronised clock or an offset above ``max_offset_ms`` (milliseconds)."""
    if not tracking:
        return ["chronyc tracking printed nothing (is chronyd running?)"]
    problems = []
    leap = tracking.get("Leap status", "?")
    if leap != "Normal":
        problems.append(f"leap status is {leap!r} (not synchronised)")
    m = re.match(r"([\d.]+) seconds (fast|slow)", tracking.get("System time", ""))
    if not m:
        problems.append(f"no system time offset in tracking ({tracking.get('System time')!r})")
    elif float(m.group(1)) * 1000 > max_offset_ms:
        problems.append(f"clock is {float(m.group(1)) * 1000:.1f} ms {m.group(2)}, bound {max_offset_ms} ms")
    return problems


# Sockets -----------------------------------------------------------------------------
def listening_sockets(ss_output: str) -> set[str]:
    """``ss -Hlntu`` -> {"tcp/22", "udp/123", ...} for sockets not bound to loopback."""
    found = set()
    for line in ss_output.splitlines():
        cells = line.split()
        if len(cells) < 5:
            continue
        proto, local = cells[0], cells[4]
        host, _, port = local.rpartition(":")
        host = host.strip("[]").split("%")[0]
        if host.startswith("127.") or host == "::1":
            continue
        found.add(f"{proto}/{port}")
    return found


#: The module that loads Horovod's compiled extension for each framework
#: ``horovodrun --check-build`` names: importing it fails when the extension
#: was not built (``import horovod.torch`` itself only prints a warning).
HOROVOD_EXTENSIONS = {"TensorFlow": "horovod.tensorflow.mpi_ops", "PyTorch": "horovod.torch.mpi_lib_v2",
                      "MXNet": "horovod.mxnet.mpi_lib"}


def missing_nodes(expected_count: int, answering: list[str], prefix: str = "node") -> list[str]:
    """Names of the nodes a cluster of ``expected_count`` should have
    (``node1`` .. ``nodeN``, as the node-layout module names them) that are
    not among ``answering``."""
    return [f"{prefix}{i}" for i in range(1, expected_count + 1) if f"{prefix}{i}" not in answering]


#: Lines that name the cause of a failure, most specific first (the rest of
#: a tool's output is usually consequences: "ORTE was unable to ...",
#: "Horovod detected that one or more processes exited ...").
ROOT_CAUSE_PATTERNS = (
    r"command not found",
    r"Unable to find address for",
    r"Host key verification failed",
    r"Connection refused",
    r"No route to host",
    r"Connection timed out",
    r"Permission denied",
    r"ModuleNotFoundError|ImportError|undefined symbol",
    r"No such file or directory",
    r"Wait timeout after \d+ seconds for key",
    r"Horovod background loop uncaught exception|HorovodInternalError",
    r"This account is currently not available",
    r"ORTE was unable to reliably start one or more daemons",
)
#: Lines that never explain a failure: TensorFlow's start-up notices, and
#: the launcher's own summary of a rank that failed (the symptom).
NOISE_PATTERNS = (r"\] oneDNN custom operations", r"cpu_feature_guard", r"To enable the following instructions",
                  r"This TensorFlow binary is optimized", r"exit with status code",
                  r"one or more processes exited with non-zero status", r"^-+ ?(stdout|stderr)$", r"^exit \d+$")


def cause_line(output: str) -> str:
    """:func:`root_cause`, or else the last line of ``output`` that is not
    start-up noise (:data:`NOISE_PATTERNS`), preferring what a rank printed
    (``[1]<stderr>: ...``) over the launcher's traceback; at most 300
    characters."""
    found = root_cause(output)
    if found:
        return found
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and not any(re.search(p, line) for p in NOISE_PATTERNS)]
    # What a rank printed explains more than the launcher's traceback after it.
    ranks = [line for line in lines if re.match(r"\[\d+\]<std(err|out)>:.*\S", line)]
    pick = ranks or lines
    return pick[-1][-300:] if pick else ""


#: An Open MPI daemon's own error line: ``[node2:00881] [[5000,0],1]
#: ORTE_ERROR_LOG: <what> in file <source> at line <n>``.
_ORTE_ERROR = re.compile(r"^\[([^:\]\s]+):\d+\] \[\[\d+,\d+\],\d+\] ORTE_ERROR_LOG: (.+?)(?: in file \S+ at line \d+)?$",
                         re.M)
#: Open MPI's help message for a directory it could not make (its session
#: directory under /tmp).
_MKDIR_FAILED = re.compile(r"A call to mkdir was unable to create the desired directory:\s+Directory:\s*(\S+)\s+"
                           r"Error:\s*(.+)")


def orted_error(output: str) -> str:
    """The first error an Open MPI daemon (orted) reported about its own node
    in mpirun's ``output``, naming the node: "node2: orted could not create
    /tmp/ompi.node2.2001: No space left on device", "node2: orted: The
    system limit on number of pipes a process can open was reached"; ""
    when no daemon reported one.  mpirun's own summary ("ORTE was unable to
    reliably start one or more daemons") lists possible causes only."""
    m = _ORTE_ERROR.search(output)
    if not m:
        return ""
    node, what = m[1], m[2].strip()
    made = _MKDIR_FAILED.search(output)
    if made:
        return f"{node}: orted could not create {made[1]}: {made[2].strip()}"
    return f"{node}: orted: {what}"


def gloo_bind_hint(output: str) -> str:
    """Why Gloo could not bind, when its output says so ("Unable to find
    address for node1; bind(2) for [10.0.0.2] failed"): Gloo binds the
    address its node's hostname resolves to, so a node whose hostname
    resolves to another node's address (two nodes with one hostname, a stale
    name) cannot; "" otherwise."""
    m = re.search(r"Unable to find address for (\S+?); bind\(2\) for \[([^\]]+)\] failed", output)
    if not m:
        return ""
    return (f"a rank's node calls itself {m[1]} and {m[1]} resolves to {m[2]}, an address that node lacks "
            "(two nodes with one hostname, or a stale name)")


#: A rank's Gloo rendezvous that gave up: ``[1]<stderr>: ... Wait timeout
#: after 30 seconds for key(s): 0`` (horovod/common/gloo/http_store.cc).
_GLOO_WAIT = re.compile(r"^\[(\d+)\]<std(?:err|out)>:.*Wait timeout after (\d+) seconds for key\(s\): ([\d, ]+)", re.M)


def gloo_timeout_hint(output: str, nodes: list[str] | None = None) -> str:
    """Why a job stopped in Gloo's rendezvous, when a rank's output says so:
    rank 1 (on ``nodes[1]``) waited HOROVOD_GLOO_TIMEOUT_SECONDS for the
    ranks named by the key, which reached ``hvd.init`` later (a slow start:
    TensorFlow's import under QEMU's TCG takes minutes) or never; "" when
    no rank says so.  ``nodes``: the node of each rank, in rank order."""
    m = _GLOO_WAIT.search(output)
    if not m:
        return ""
    rank, seconds, keys = int(m[1]), m[2], m[3].strip().rstrip(",")
    where = f" on {nodes[rank]}" if nodes and rank < len(nodes) else ""
    return (f"rank {rank}{where} waited {seconds} s in Gloo's rendezvous for rank(s) {keys} "
            "(horovodrun's --gloo-timeout-seconds: the profile's smoke.gloo_timeout_s raises it)")


def root_cause(output: str) -> str:
    """The first line of ``output`` that matches :data:`ROOT_CAUSE_PATTERNS`
    (in their order of precedence), stripped; ``""`` when none matches."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for pattern in ROOT_CAUSE_PATTERNS:
        for line in lines:
            if re.search(pattern, line):
                return line[:300]
    return ""


def pem_blocks(text: str) -> list[str]:
    """The PEM certificate blocks of ``text`` with whitespace inside each
    block removed (a bundle and a .crt file compare equal by content)."""
    blocks = re.findall(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", text, re.S)
    return ["".join(block.split()) for block in blocks]


def untrusted_certificates(bundle: str, certificates: dict[str, str]) -> list[str]:
    """Names of ``certificates`` (name -> PEM text) with a certificate that
    is not in the CA ``bundle`` text (``/etc/ssl/certs/ca-certificates.crt``)
    or with no certificate at all."""
    trusted = set(pem_blocks(bundle))
    return [name for name, pem in certificates.items()
            if not pem_blocks(pem) or any(block not in trusted for block in pem_blocks(pem))]


def parse_exportfs(text: str) -> dict[str, dict[str, list[str]]]:
    """``exportfs -v`` -> {export path: {client: [options]}} (an entry may
    wrap onto a second line when the path is long)."""
    out: dict[str, dict[str, list[str]]] = {}
    for path, client, options in re.findall(r"(/\S*)\s+(\S+?)\(([^)]*)\)", text):
        out.setdefault(path, {})[client] = options.split(",")
    return out


def export_problems(exports: dict[str, dict[str, list[str]]], path: str, client: str,
                    required: list[str]) -> list[str]:
    """What is wrong with the export of ``path`` to ``client``: not
    exported, exported to other clients too, or lacking one of ``required``
    (e.g. ``root_squash``, ``sync``, ``rw``)."""
    clients = exports.get(path)
    if not clients:
        return [f"{path} is not exported (exports: {sorted(exports) or 'none'})"]
    problems = [f"{path} is also exported to {other}" for other in sorted(clients) if other != client]
    if client not in clients:
        return problems + [f"{path} is not exported to {client}"]
    have = clients[client]
    problems += [f"export {path} to {client} lacks {opt} (has {','.join(have)})" for opt in required
                 if opt not in have]
    return problems


#: Lines of an elastic job's output (horovodrun's and the ranks') that show
#: the job saw a worker fail, as Horovod 0.28's Gloo launcher and transport
#: print them: the launcher's "Process <rank> exit with status code <n>", the
#: worker's SSH session "closed by remote host", Gloo's "Connection closed
#: by peer" / "Connection reset by peer", and a blacklisted host.
FAILURE_SEEN = re.compile(r"Process \d+ exit with status code [1-9]\d*|closed by remote host|"
                          r"Connection (?:closed|reset) by peer|[Bb]lacklist(?:ing|ed) host")


def failure_evidence(output: str, limit: int = 3) -> list[str]:
    """The first ``limit`` lines of ``output`` that show the job saw a worker
    fail (:data:`FAILURE_SEEN`), stripped and cut to 200 characters; empty
    when the job printed none (it shrank without noticing a failure)."""
    found = []
    for line in output.splitlines():
        if FAILURE_SEEN.search(line):
            found.append(line.strip()[:200])
            if len(found) >= limit:
                break
    return found
