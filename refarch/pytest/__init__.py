"""The suite's pytest plugin (registered by the root ``conftest.py``): the
run, its cluster fixture and reporting hooks (:mod:`.plugin`), the node
logs (:mod:`.nodelogs`) and the Horovod workloads' session fixtures
(:mod:`.workloads`).
"""
