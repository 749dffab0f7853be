"""The assertions of the smoke, idempotence and GPU checks fail on faulty
inputs: each check function is called with recorded or faulty data in place
of a deployed cluster (the fault cases in tests/faults cover the others)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch.contract import Contract
from refarch.judge import checks
from refarch.profile import load_profile
from refarch.tools.ansible import PlaybookResult, parse_recap
from tests.integration import test_gpu, test_nodes, test_playbook, test_smoke
from tests.unit.test_contract import OUTPUTS

DATA = Path(__file__).parent / "data"
CLUSTER = SimpleNamespace(contract=Contract.from_outputs(OUTPUTS))


def run(world_size, hosts, ips, ifaces=None):
    return {"world_size": world_size, "hosts": hosts, "images_per_sec": ips,
            "gloo_ifaces": ifaces or ["eth0"] * len(hosts)}


def test_all_nodes_check_fails_when_ranks_share_a_host():
    runs = {1: run(1, ["node1"], 30.0), 2: run(2, ["node1", "node1"], 40.0)}
    with pytest.raises(AssertionError, match=r"ranks ran on \['node1', 'node1'\]"):
        test_smoke.test_training_on_all_nodes(runs, CLUSTER)


def test_single_rank_check_fails_without_throughput():
    with pytest.raises(AssertionError):
        test_smoke.test_training_single_rank(run(1, ["node1"], 0.0))


def test_interface_check_fails_when_gloo_used_another_interface():
    hosts = {n: SimpleNamespace(check_output=lambda cmd: "eth0") for n in ("node1", "node2")}
    runs = {2: run(2, ["node1", "node2"], 40.0, ifaces=["eth0", "lo"])}
    with pytest.raises(AssertionError, match=r"node2: Gloo used 'lo', cluster interface is 'eth0'"):
        test_smoke.test_training_used_the_cluster_interface(runs, CLUSTER, hosts, load_profile("local"))


def routed(dev):
    """A testinfra-like host on eth0 whose route to every peer leaves by ``dev``."""
    return SimpleNamespace(check_output=lambda cmd: "eth0",
                           run=lambda cmd: SimpleNamespace(stdout=f"10.0.0.9 dev {dev} src 10.0.0.5 uid 0 \\    cache"))


def test_interface_check_fails_when_the_bytes_did_not_cross_the_cluster_interface():
    hosts = {n: routed("eth0") for n in ("node1", "node2")}
    r = run(2, ["node1", "node2"], 40.0)
    r["cluster_iface_bytes"] = {"node1": 3_235_980_349, "node2": 3_100_000}  # node2: only SSH and storage
    with pytest.raises(AssertionError, match=r"node2: its cluster interface carried 3\.1 MB during np=2 "
                                             r"\(15 steps; at least 16 MB expected\)\n"):
        test_smoke.test_training_used_the_cluster_interface({2: r}, CLUSTER, hosts, load_profile("local"))


def test_interface_check_names_the_route_that_takes_the_peers_traffic_elsewhere():
    hosts = {"node1": routed("rfside0"), "node2": routed("eth0")}
    r = run(2, ["node1", "node2"], 40.0)
    r["cluster_iface_bytes"] = {"node1": 900_000, "node2": 3_235_980_349}
    with pytest.raises(AssertionError, match=r"node1: its cluster interface carried 0\.9 MB during np=2 \(15 steps; "
                                             r"at least 16 MB expected\): traffic to node2 \(\S+\) leaves by "
                                             r"rfside0, not eth0"):
        test_smoke.test_training_used_the_cluster_interface({2: r}, CLUSTER, hosts, load_profile("local"))


def test_idempotence_check_fails_on_a_converging_run():
    text = (DATA / "ansible-converge.log").read_text()
    cluster = SimpleNamespace(configure=lambda **kw: PlaybookResult(0, parse_recap(text), text))
    with pytest.raises(AssertionError, match=r"second playbook run changed tasks on \{'node1': 4, 'node2': 4\}"):
        test_playbook.test_playbook_idempotent(cluster)


class FakeNode:
    """A testinfra-like host whose commands return canned output."""

    def __init__(self, outputs):
        self.outputs = outputs

    def run(self, command, *args):
        for fragment, (rc, out) in self.outputs.items():
            if fragment in command:
                return SimpleNamespace(rc=rc, stdout=out, stderr="")
        return SimpleNamespace(rc=127, stdout="", stderr="command not found")


GPU_EXPECT = load_profile("openstack-v100").expect


def test_gpu_check_fails_on_ecc_errors_and_persistence_off():
    node = FakeNode({"nvidia-smi": (0, (DATA / "gpu" / "nvidia-smi-query-faulty.csv").read_text())})
    with pytest.raises(AssertionError, match=r"node1: 1 GPUs, expected 1|node1: .*uncorrected ECC errors"):
        test_gpu.test_gpus_healthy(node, "node1", GPU_EXPECT)


def test_cuda_and_nccl_checks_fail_on_old_or_missing_versions():
    old_cuda = FakeNode({"nvcc": (0, "Cuda compilation tools, release 11.8, V11.8.89")})
    with pytest.raises(AssertionError, match=r"node2: CUDA 11\.8 is older than 12\.4"):
        test_gpu.test_cuda_version(old_cuda, "node2", GPU_EXPECT)
    with pytest.raises(AssertionError, match=r"node2: libnccl2 is not installed"):
        test_gpu.test_nccl_version(FakeNode({}), "node2", GPU_EXPECT)


def test_dcgm_check_fails_on_a_failed_diagnostic():
    node = FakeNode({"command -v dcgmi": (0, "/usr/bin/dcgmi"),
                     "dcgmi diag": (0, (DATA / "gpu" / "dcgmi-diag-r1-fail.txt").read_text())})
    with pytest.raises(AssertionError, match=r"node1: dcgmi diag -r 1 failed: \['Persistence Mode'\]"):
        test_gpu.test_dcgm_diagnostic(node, "node1", GPU_EXPECT)


def test_gpu_checks_skip_with_the_profiles_reason_on_cpu_profiles():
    with pytest.raises(pytest.skip.Exception, match="profile local expects 0 GPUs per node"):
        test_gpu.expect.__wrapped__(load_profile("local"))


def test_root_squash_check_fails_when_root_can_write():
    from contextlib import nullcontext

    node = FakeNode({"touch": (0, ""), "rm -f": (0, "")})
    node.sudo = lambda *a: nullcontext()
    with pytest.raises(AssertionError, match=r"node1: root can write to /shared \(export is not root-squashed\)"):
        test_nodes.test_shared_storage_root_squashed(node, "node1", load_profile("openstack-v100"))


def test_scaling_table_check_fails_when_a_world_size_ran_on_fewer_nodes():
    profile = load_profile("local")
    table = [{"batch_size": 16, "world_size": 1, "images_per_sec": 30.0, "hosts": ["node1"]},
             {"batch_size": 16, "world_size": 2, "images_per_sec": 40.0, "hosts": ["node1", "node1"]}]
    with pytest.raises(AssertionError, match=r"batch 16 np=2: 2 ranks reported 1 host \(\['node1', 'node1'\]\) "
                                             r"on node1:1,node2:1: two ranks on one node"):
        test_smoke.test_scaling_table(table, profile, CLUSTER)


def test_untrusted_certificates_are_named():
    ca = "-----BEGIN CERTIFICATE-----\nMIIBaaaa\nbbbb==\n-----END CERTIFICATE-----\n"
    other = "-----BEGIN CERTIFICATE-----\nMIIBcccc\n-----END CERTIFICATE-----\n"
    bundle = "# system\n" + other + "-----BEGIN CERTIFICATE-----\nMIIBaaaabbbb==\n-----END CERTIFICATE-----\n"
    assert checks.untrusted_certificates(bundle, {"proxy.crt": ca}) == []  # line breaks differ, same content
    assert checks.untrusted_certificates(other, {"proxy.crt": ca, "empty.crt": "not a certificate"}) == [
        "proxy.crt", "empty.crt"]


EXPORTFS = """/srv/shared   \t10.215.0.0/24(sync,wdelay,hide,no_subtree_check,sec=sys,rw,secure,root_squash,no_all_squash)
/srv/a-very-long-path-that-wraps
\t\t10.215.0.0/24(async,wdelay,hide,no_subtree_check,sec=sys,rw,secure,no_root_squash,no_all_squash)
"""


def test_export_problems_name_the_option():
    exports = checks.parse_exportfs(EXPORTFS)
    assert exports["/srv/shared"]["10.215.0.0/24"][-2] == "root_squash"
    assert checks.export_problems(exports, "/srv/shared", "10.215.0.0/24", ["rw", "sync", "root_squash"]) == []
    assert checks.export_problems(exports, "/srv/a-very-long-path-that-wraps", "10.215.0.0/24",
                                  ["sync", "root_squash"]) == [
        "export /srv/a-very-long-path-that-wraps to 10.215.0.0/24 lacks sync (has async,wdelay,hide,no_subtree_check,"
        "sec=sys,rw,secure,no_root_squash,no_all_squash)",
        "export /srv/a-very-long-path-that-wraps to 10.215.0.0/24 lacks root_squash (has async,wdelay,hide,"
        "no_subtree_check,sec=sys,rw,secure,no_root_squash,no_all_squash)"]
    assert checks.export_problems(exports, "/srv/x", "10.0.0.0/8", ["rw"])[0].startswith("/srv/x is not exported")


def test_horovod_build_check_says_a_check_build_stopped_at_its_limit_did_not_finish():
    """A check-build that timeout stopped (124, or 137 after -k's KILL) is
    named as such, not by the last line it printed (TensorFlow's notice)."""
    profile = load_profile("local")
    notice = "I tensorflow/core/util/port.cc:113] oneDNN custom operations are on."
    for rc in (124, 137):
        late = SimpleNamespace(rc=rc, stdout="", stderr=notice)
        with pytest.raises(AssertionError, match=r"^node2: horovodrun --check-build did not finish within 300 s"):
            test_nodes.test_horovod_build(None, "node2", profile, {"node2": (late, {})})
    built = SimpleNamespace(rc=0, stderr="", stdout=(DATA / "check-build-cpu.txt").read_text(encoding="utf-8"))
    module = checks.HOROVOD_EXTENSIONS["TensorFlow"]
    imports = {"TensorFlow": (module, SimpleNamespace(rc=124, stdout=notice, stderr=""))}
    with pytest.raises(AssertionError, match=rf"{module} \(TensorFlow\) does not import: did not finish within 300 s"):
        test_nodes.test_horovod_build(None, "node2", profile, {"node2": (built, imports)})
