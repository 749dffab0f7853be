"""The all-in-one's ML2 mechanism driver ``refarch_bind_all``: binds every
port to the first segment offered, with no agent.

Nova's fake driver makes servers without tap devices, so no L2 agent could
bind their ports, and an unbound port puts the server into ERROR
(binding_failed).  Neutron's own test driver binds only for special host
names; this one binds every port (vif_type ovs, status ACTIVE) and plumbs
nothing: security group rules are stored and served, not enforced.
Installed into the image with an entry point in the
``neutron.ml2.mechanism_drivers`` namespace (refarch/clouds/aio/build.sh).
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class BindAllMechanismDriver(api.MechanismDriver):
    """Binds any port to the first segment it is offered."""

    def initialize(self):
        pass

    @property
    def connectivity(self):
        return portbindings.CONNECTIVITY_L2

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(segment[api.ID], portbindings.VIF_TYPE_OVS,
                                {portbindings.CAP_PORT_FILTER: True, portbindings.OVS_HYBRID_PLUG: False},
                                status=constants.PORT_STATUS_ACTIVE)
            return
