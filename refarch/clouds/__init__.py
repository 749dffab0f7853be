"""Clouds: where a cluster's nodes come from.

A cloud driver (:class:`refarch.clouds.protocol.CloudDriver`) gives the
cluster lifecycle what it needs of one cloud: the local cloud of podman
"machines" (:mod:`.local`, its node image :mod:`.image`, the Horovod
wheelhouse :mod:`.wheelhouse`, the exposure probe :mod:`.exposure`, the
caches :mod:`.caches`; who owns a run is :mod:`refarch.owner`), QEMU
virtual machines with a real kernel (:mod:`.vm`) and OpenStack
(:mod:`.openstack`); :mod:`.drivers` picks one for a profile.
"""
