"""The per-node cost benchmark's fit (refarch.bench) and its plot."""

import json

import pytest

from refarch import bench


def test_a_linear_phase_fits_its_slope():
    assert bench.fit({2: 60.0, 4: 100.0, 8: 180.0}) == {"s_per_node": 20.0, "intercept_s": 20.0, "growth": "linear"}


def test_a_quadratic_phase_is_faster_than_linear():
    assert bench.fit({2: 4.0, 4: 16.0, 8: 64.0})["growth"] == "faster than linear"


def test_a_phase_that_does_not_grow_is_flat():
    assert bench.fit({2: 5.0, 4: 5.0, 8: 4.9})["growth"] == "flat"


def test_a_fit_needs_two_node_counts():
    with pytest.raises(ValueError, match="two node counts"):
        bench.fit({2: 5.0})


def test_fits_skip_a_phase_a_run_lacks_and_plot_writes_svg(tmp_path):
    runs = {2: {"deploy": 3.0, "configure": 60.0}, 4: {"deploy": 5.0, "configure": 90.0}, 8: {"deploy": 9.0}}
    assert list(bench.fits(runs)) == ["deploy"]
    data = {"runs": [{"nodes": n, "phases_s": p} for n, p in runs.items()]}
    bench.plot(data, tmp_path / "b.svg")
    assert 'id="phase-deploy"' in (tmp_path / "b.svg").read_text() and json.dumps(data)


@pytest.mark.parametrize("nodes", ["2", "2,x", "0,4", "2,16"])
def test_bad_node_counts_fail_before_anything_runs(nodes, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["scale", "--nodes", nodes])
    assert exc.value.code == 2 and "--nodes" in capsys.readouterr().err
