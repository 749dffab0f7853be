"""The suite's pytest plugin, one module per concern, each registered by the
root ``conftest.py``: the options and the run they select (:mod:`.options`),
the session's state (:mod:`.state`), the cluster and host fixtures
(:mod:`.fixtures`, helpers in :mod:`.hosts`), node logs on failure
(:mod:`.nodelogs`), the reporting hooks (:mod:`.reporting`), the Horovod
workloads' session fixtures (:mod:`.workloads`) and the availability
workloads (:mod:`.availability`).
"""
