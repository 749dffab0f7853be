import pytest

from refarch.errors import ProfileError
from refarch.overrides import parse_overrides
from refarch.profile import available_profiles, load_profile


def test_local_profile_loads():
    p = load_profile("local")
    assert p.cloud == "local" and p.nodes.count == 2
    assert "scaling.efficiency" in p.property_specs()


def test_unknown_profile_names_the_available_ones():
    with pytest.raises(ProfileError, match=r"unknown profile 'nope'; available: .*local"):
        load_profile("nope")


@pytest.mark.parametrize(
    "override, message",
    [
        ({"nodes.count": 0}, r"nodes\.count: Input should be greater than or equal to 1"),
        ({"nodes.count": 9}, r"nodes\.count: Input should be less than or equal to 8"),
        ({"network.subnet_pool": "10.300.0.0/16"}, r"network\.subnet_pool: .*malformed subnet"),
        ({"network.subnet_pool": "10.1.0.0/24"}, r"the pool 10\.1\.0\.0/24 cannot hold a /23"),
        ({"properties.scaling.efficiency.reference.upper": 0.1}, r"lower 0.35 is above upper 0.1"),
        ({"cloud": "aws"}, r"cloud: Input should be 'local' or 'openstack'"),
        ({"nodes.colour": "red"}, r"nodes\.colour: Extra inputs are not permitted"),
    ],
)
def test_bad_values_give_one_line_naming_the_field(override, message):
    with pytest.raises(ProfileError, match=message) as info:
        load_profile("local", override)
    assert "\n" not in str(info.value)


def test_profile_by_path_and_bad_yaml(tmp_path):
    bad = tmp_path / "broken.yml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(str(bad))


def test_overrides_are_parsed_as_yaml():
    assert parse_overrides(["nodes.count=3", "smoke.model=MobileNetV2"]) == {
        "nodes.count": 3, "smoke.model": "MobileNetV2"}
    with pytest.raises(ProfileError, match="not KEY=VALUE"):
        parse_overrides(["nodes.count"])


def test_every_shipped_profile_is_valid():
    for name in available_profiles():
        load_profile(name)


def test_root_as_training_user_is_rejected():
    with pytest.raises(ProfileError, match="training_user.name: .*must not be root"):
        load_profile("local", {"training_user.name": "root"})


def test_scaling_points_cover_every_world_size_and_batch_size():
    assert load_profile("local").scaling_points() == [(16, 1), (16, 2)]
    p = load_profile("local", {"nodes.count": 3, "smoke.batch_sizes": [32]})
    assert p.scaling_points() == [(16, 1), (16, 2), (16, 3), (32, 1), (32, 2), (32, 3)]
    gpu = load_profile("openstack-v100")
    assert {b for b, _ in gpu.scaling_points()} == {32, 196}


def test_world_sizes_beyond_the_node_count_are_rejected():
    with pytest.raises(ProfileError, match=r"smoke.world_sizes \[3\] are not between 1 and nodes.count 2"):
        load_profile("local", {"smoke.world_sizes": [1, 3]})


def test_a_profile_extends_another(tmp_path):
    """The scale profile is the local one with eight smaller nodes; a
    cycle of extends is one line, before anything is made."""
    from refarch.overrides import merged, with_base

    scale, local = load_profile("scale"), load_profile("local")
    assert (scale.nodes.count, scale.nodes.flavor.memory_mb) == (8, 2048)
    assert scale.training_user == local.training_user and scale.expect.sshd == local.expect.sshd
    assert scale.smoke.model == local.smoke.model and scale.smoke.image_size == 32
    assert merged({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}}
    loop = {"x": {"name": "x", "extends": "y"}, "y": {"name": "y", "extends": "x"}}
    with pytest.raises(ProfileError, match="extends y, which extends it back"):
        with_base(loop["x"], loop.__getitem__)
