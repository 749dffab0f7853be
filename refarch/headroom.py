"""Per-node resource headroom, judged before any job: the training user's
limits as a login over SSH gets them (open files, processes, locked
memory), the memory a node can still give (the machine's and its cgroup's),
free space and inodes where jobs write (/tmp, the shared mount, the home
directory), and the CPUs its cgroup quota allows.  A node below what the
profile's workloads need fails naming the node, the resource, the figure
and the need (``tests/integration/test_nodes.py::test_resource_headroom``).

:class:`Headroom` is the profile's ``expect.headroom``; :data:`PROBE` reads
a node (one shell command, as root) and :data:`LIMITS` the training user's
limits; :func:`parse_probe` and :func:`parse_limits` read their output and
:func:`memory_problem`, :func:`cpu_problem`, :func:`disk_problems` and
:func:`limit_problems` judge it (pure functions, tested on recorded readings).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: A cgroup memory limit at or above this is "no limit" (cgroup v1 writes
#: 2^63 rounded down to the page size; v2 writes "max").
UNLIMITED_BYTES = 1 << 60


class Headroom(BaseModel):
    """What every node must have left before a job starts.

    ``rank_memory_mib``: the resident size of one rank of each workload
    (MiB, measured: the figure's source says where); a node needs ranks per
    node x the largest of them plus ``reserve_memory_mib`` for its own
    services and the launcher.  ``min_free_mib`` / ``min_free_inodes``: in
    /tmp (Open MPI's session directory, Ansible's and Python's temporary
    files), on the shared mount and in the training user's home directory.
    ``min_memlock_kib`` None: locked memory is not judged (only RDMA and
    NCCL's shared memory need it).  ``source`` says where the figures come
    from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    min_nofile: int = Field(1024, ge=1)
    """Minimum soft open-file limit (ulimit -Sn) the training user gets in a login over SSH on every node."""
    min_nproc: int = Field(1024, ge=1)
    """Minimum soft process limit (ulimit -Su) the training user gets in a login over SSH on every node."""
    min_memlock_kib: int | None = Field(None, ge=0)
    """Minimum soft locked-memory limit (ulimit -Sl) in KiB; None: not judged (only RDMA and NCCL need it)."""
    rank_memory_mib: dict[str, int] = {}
    """Resident MiB of one rank per workload (smoke, convergence); a node needs ranks per node x the largest."""
    reserve_memory_mib: int = Field(256, ge=0)
    """MiB a node needs beyond its ranks' memory, for its own services and the launcher."""
    min_free_mib: int = Field(256, ge=0)
    """Minimum free space in MiB in /tmp, on the shared mount and in the training user's home on every node."""
    min_free_inodes: int = Field(10000, ge=0)
    """Minimum free inodes in those same places (a file system that reports none, such as sshfs, is not judged)."""
    source: str = ""
    """Where the headroom figures come from (measurements, defaults), for the reader."""


#: Reads a node as root: ``key=value`` lines (:func:`parse_probe`).  The
#: cgroup files are the node's own (v2 at the root of the mount, v1 under
#: memory/ and cpu/); ``free:<path>`` is ``df -P``'s available KiB, free
#: inodes and total inodes of the file system under that path.
PROBE = r"""
printf 'mem_available_kib=%s\n' "$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)"
if [ -f /sys/fs/cgroup/memory.max ]; then
  printf 'cg_limit=%s\ncg_usage=%s\n' "$(cat /sys/fs/cgroup/memory.max)" "$(cat /sys/fs/cgroup/memory.current)"
  printf 'cg_file_cache=%s\n' "$(awk '$1 == "file" {f = $2} $1 == "shmem" {s = $2} END {printf "%.0f\n", f - s}' /sys/fs/cgroup/memory.stat)"
  printf 'cpu_max=%s\n' "$(cat /sys/fs/cgroup/cpu.max 2>/dev/null)"
elif [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  printf 'cg_limit=%s\n' "$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
  printf 'cg_usage=%s\n' "$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes)"
  printf 'cg_file_cache=%s\n' "$(awk '$1 == "total_cache" {f = $2} $1 == "total_shmem" {s = $2} END {printf "%.0f\n", f - s}' /sys/fs/cgroup/memory/memory.stat)"
  printf 'cpu_max=%s %s\n' "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)" "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
fi
printf 'nproc=%s\n' "$(nproc)"
for p in "$@"; do
  printf 'free:%s=%s %s\n' "$p" "$(df -Pk "$p" | awk 'NR == 2 {print $4}')" "$(df -Pi "$p" | awk 'NR == 2 {print $4, $2}')"
done
"""

#: The training user's soft limits as a login over SSH gets them (the way
#: mpirun and horovodrun start ranks on a node): open files, processes,
#: locked memory (KiB or "unlimited").
LIMITS = "ulimit -Sn; ulimit -Su; ulimit -Sl"


def parse_probe(text: str) -> dict[str, str]:
    """:data:`PROBE`'s output -> {key: value} (``free:/tmp`` -> ``"KiB inodes
    total"``)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def parse_limits(text: str) -> dict[str, str]:
    """:data:`LIMITS`' three lines -> {"nofile", "nproc", "memlock"}.

    Raises:
        ValueError: not three lines (the login failed or printed more).
    """
    lines = text.split()
    if len(lines) != 3:
        raise ValueError(f"expected three limits, got {text.strip()[-200:]!r}")
    return dict(zip(("nofile", "nproc", "memlock"), lines, strict=True))


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / (1 << 20):.0f} MiB"


def memory_problem(readings: dict[str, str], need_mib: int, why: str) -> str:
    """The memory a node can still give: MemAvailable, and under a cgroup
    limit the limit less what the cgroup uses, its file cache counted as
    free (``cg_file_cache``: page cache less shared memory, which the kernel
    reclaims before it fails an allocation: the first node of 8 serves the
    share and caches 550 MiB of it as active pages; older readings give
    ``cg_inactive_file``); "" when it covers ``need_mib``, else "memory:
    <figure>, need <need_mib> MiB (<why>)"."""
    available = int(readings.get("mem_available_kib") or 0) * 1024
    detail = f"MemAvailable {_mib(available)}"
    limit = int(readings.get("cg_limit") or 0) if (readings.get("cg_limit") or "max").isdigit() else 0
    if 0 < limit < UNLIMITED_BYTES:
        cache = readings.get("cg_file_cache", readings.get("cg_inactive_file")) or 0
        used = int(readings.get("cg_usage") or 0) - int(cache)
        available = min(available, limit - used)
        detail = f"cgroup limit {_mib(limit)}, {_mib(used)} in use; {detail}"
    if available >= need_mib << 20:
        return ""
    return f"memory: {_mib(available)} available ({detail}), need {need_mib} MiB ({why})"


def cpu_problem(readings: dict[str, str], need_cpus: float, why: str) -> str:
    """CPUs the node's cgroup quota allows (``quota/period``, else ``nproc``)
    against ``need_cpus``; "" when enough."""
    cpus = float(readings.get("nproc") or 0)
    detail = f"nproc {cpus:g}"
    quota, _, period = (readings.get("cpu_max") or "").partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        cpus = min(cpus, int(quota) / int(period))
        detail = f"cgroup quota {quota}/{period} us; {detail}"
    if cpus >= need_cpus:
        return ""
    return f"CPU: {cpus:g} CPUs ({detail}), need {need_cpus:g} ({why})"


def disk_problems(readings: dict[str, str], paths: dict[str, str], headroom: Headroom) -> list[str]:
    """Free space and inodes under each of ``paths`` ({what: path}) against
    the headroom; a file system that reports no inodes (sshfs) is judged on
    space only."""
    out = []
    for what, path in paths.items():
        value = readings.get(f"free:{path}", "").split()
        if len(value) != 3 or not all(v.isdigit() for v in value):
            out.append(f"{what} ({path}): free space not read ({readings.get(f'free:{path}', 'nothing')!r})")
            continue
        kib, inodes, total = (int(v) for v in value)
        if kib < headroom.min_free_mib * 1024:
            out.append(f"{what} ({path}): {kib // 1024} MiB free, need {headroom.min_free_mib} MiB")
        if total and inodes < headroom.min_free_inodes:
            out.append(f"{what} ({path}): {inodes} inodes free, need {headroom.min_free_inodes}")
    return out


def limit_problems(limits: dict[str, str], headroom: Headroom, user: str) -> list[str]:
    """The training user's soft limits (:func:`parse_limits`) against the
    headroom ("unlimited" always passes)."""
    out = []
    wanted = {"nofile": headroom.min_nofile, "nproc": headroom.min_nproc, "memlock": headroom.min_memlock_kib}
    for name, need in wanted.items():
        have = limits.get(name, "")
        if need is None or have == "unlimited":
            continue
        if not have.isdigit() or int(have) < need:
            unit = " KiB" if name == "memlock" else ""
            out.append(f"{name} limit of {user} over SSH: {have or 'unread'}{unit}, need {need}{unit}")
    return out
