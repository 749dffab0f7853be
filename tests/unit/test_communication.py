"""The communication property offline: iperf3's JSON and the allreduce
benchmark's result recorded between two nodes of a real local run, fed to
the measurement in place of a deployed cluster."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from refarch.judge import checks
from refarch.judge.results import Results
from refarch.profile import load_profile
from refarch.pytest import workloads
from tests.integration import test_properties

DATA = Path(__file__).parent / "data" / "communication"


class FakeHost:
    """Answers run_as() commands with recorded outputs; remembers them."""

    def __init__(self, client_json: str = "", server_rc: int = 0):
        self.client_json, self.server_rc, self.commands = client_json, server_rc, []

    def run(self, command):
        self.commands.append(command)
        if "iperf3 -c" in command:
            return SimpleNamespace(rc=0 if '"error"' not in self.client_json else 1, stdout=self.client_json, stderr="")
        if "iperf3 -s" in command:
            return SimpleNamespace(rc=self.server_rc, stdout="", stderr="iperf3: error - unable to start listener")
        return SimpleNamespace(rc=0, stdout="", stderr="")


def test_iperf3_throughput_in_bytes_per_second():
    client, server = FakeHost((DATA / "iperf3-node1-node2.json").read_text()), FakeHost()
    assert workloads.iperf3_bytes_per_sec(client, server, "10.213.0.11", "hvd") == pytest.approx(2.3718e9, rel=1e-3)
    assert any("kill" in c for c in server.commands), "the iperf3 server was not stopped"


def test_iperf3_refused_names_the_error_and_still_stops_the_server():
    client, server = FakeHost((DATA / "iperf3-refused.json").read_text()), FakeHost()
    with pytest.raises(RuntimeError, match=r"iperf3 to 10\.213\.0\.11:5201 failed: "
                                           r"unable to connect to server: Connection refused"):
        workloads.iperf3_bytes_per_sec(client, server, "10.213.0.11", "hvd")
    assert any("kill" in c for c in server.commands)


def test_allreduce_bandwidths_follow_nccl_tests():
    run = checks.parse_training_result((DATA / "allreduce-node1-node2.out").read_text())
    for size in run["sizes"]:
        assert size["algbw_Bps"] == pytest.approx(size["bytes"] / size["seconds"])
        assert size["busbw_Bps"] == pytest.approx(size["algbw_Bps"] * 2 * (2 - 1) / 2)
    assert [s["bytes"] for s in run["sizes"]] == [1 << 20, 16 << 20, 64 << 20]


def _pair(ratio_scale=1.0):
    run = checks.parse_training_result((DATA / "allreduce-node1-node2.out").read_text())
    tcp = 2.3718e9 / ratio_scale
    return {"pair": ["node1", "node2"], "tcp_Bps": tcp,
            "sizes": [{**s, "busbw_to_tcp": s["busbw_Bps"] / tcp} for s in run["sizes"]]}


def _judge(pairs, profile=None):
    cluster = SimpleNamespace(contract=SimpleNamespace(node_names=["node1", "node2"]))
    values = {"cluster": cluster, "communication_runs": pairs}
    request = SimpleNamespace(getfixturevalue=lambda name: values[name])
    results = Results("r", "local", "local")
    test_properties.test_property("communication.busbw_to_tcp", request, profile or load_profile("local"), results,
                                  SimpleNamespace(run_id="r"))
    return results.properties[-1]


def test_recorded_pair_passes():
    prop = _judge([_pair()])
    assert prop["verdict"] == "pass" and 0.3 < prop["measured"] < 0.45


def test_a_slow_allreduce_fails_naming_the_pair_and_the_figures():
    with pytest.raises(AssertionError, match=r"communication.busbw_to_tcp = 0\.0\d+ ratio \(node1-node2: allreduce "
                                             r"busbw 0\.86 GB/s at 64 MiB, raw TCP \d+\.\d+ GB/s\) is below the lower"):
        _judge([_pair(ratio_scale=0.1)])


def test_an_unmeasured_pair_is_named():
    pairs = [{"pair": ["node1", "node2"], "error": "node1 -> node2: iperf3 to 10.213.0.11:5201 failed: "
                                                   "unable to connect to server: Connection refused"}]
    with pytest.raises(pytest.fail.Exception, match=r"node pairs not measured: node1 -> node2: iperf3"):
        _judge(pairs)


def test_the_benchmark_takes_the_median_of_the_slowest_ranks_iterations(monkeypatch, capsys):
    """allreduce_bench.py on fake TensorFlow and Horovod modules: one timed
    allreduce slowed 10x (another process on a shared machine) leaves the
    figure where the others put it; each iteration counts as long as its
    slowest rank took (here the other rank, 1.5x on every iteration)."""
    import importlib.util
    import json
    import sys

    clock = [0.0]
    durations = iter([0.1] * 2 + [0.1, 0.1, 1.0, 0.1, 0.1])  # 2 warmup, 5 timed (64 MiB)

    class Tensor:
        def __init__(self, value):
            self.value = value

        def numpy(self):
            return self.value

    def allreduce(tensor, op, name):
        if op == "max":  # the other rank's times, 1.5x each
            return Tensor([max(t, 1.5 * t) for t in tensor.value])
        clock[0] += next(durations)
        return Tensor(None)

    hvd = SimpleNamespace(init=lambda: None, size=lambda: 2, rank=lambda: 0, Sum="sum", Max="max",
                          allreduce=allreduce, allgather_object=lambda o: [o, "node2"])
    tf = SimpleNamespace(float32="float32", ones=lambda shape, dtype: Tensor(shape), constant=Tensor)
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    monkeypatch.setitem(sys.modules, "horovod", SimpleNamespace(tensorflow=hvd))
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", hvd)
    path = Path(__file__).parents[2] / "descriptors/ansible/roles/horovod/files/allreduce_bench.py"
    spec = importlib.util.spec_from_file_location("allreduce_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(sys, "argv", ["allreduce_bench.py", "--sizes-mib", "64", "--warmup", "2", "--iterations", "5"])
    bench.main()
    result = json.loads(capsys.readouterr().out.split("REFARCH_RESULT ", 1)[1])
    size = result["sizes"][0]
    assert size["iteration_seconds"] == pytest.approx([0.15, 0.15, 1.5, 0.15, 0.15])
    assert size["seconds"] == pytest.approx(0.15)
    assert size["busbw_Bps"] == pytest.approx((64 << 20) / 0.15)


def test_pairs_are_every_pair_or_a_ring():
    from refarch.properties.communication import node_pairs

    names = ["n1", "n2", "n3", "n4"]
    assert len(node_pairs(names, "all")) == 6 and node_pairs(names[:1], "ring") == []
    assert node_pairs(names, "ring") == [("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1")]
    assert node_pairs(names[:2], "ring") == node_pairs(names[:2], "all") == [("n1", "n2")]
