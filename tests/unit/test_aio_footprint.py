"""What of the host an all-in-one held, and which of it is left
(refarch.clouds.aio.footprint)."""

import os

from refarch.clouds.aio import footprint


def test_only_what_is_still_on_the_host_is_named_left():
    held = {"links": {"lo", "refarch-no-such-link"}, "netns": {"refarch-no-such-netns"},
            "qemu": {str(os.getpid()), "999999999"}}
    # lo exists; this test's own process is no qemu; the others are gone.
    assert footprint.left(held) == {"links": ["lo"]}
    assert footprint.left({}) == {}
