import pytest

from refarch.errors import RefarchError
from refarch.run import new_run_id, validate_run_id


def test_run_id_uses_pipeline_then_user():
    rid = new_run_id("hvd", env={"CI_PIPELINE_ID": "4711", "USER": "x"})
    prefix, who, suffix = rid.split("-")
    assert (prefix, who, len(suffix)) == ("hvd", "4711", 6)
    assert new_run_id("hvd", env={"USER": "Ada.Lovelace"}).startswith("hvd-ada-lovelace-")
    assert validate_run_id(rid) == rid


@pytest.mark.parametrize("bad", ["", "UPPER-case", "a", "x" * 60, "has_underscore", "-lead"])
def test_malformed_run_ids_are_rejected(bad):
    with pytest.raises(RefarchError, match="malformed run id"):
        validate_run_id(bad)
