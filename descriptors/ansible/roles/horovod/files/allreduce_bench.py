#!/usr/bin/env python3
"""Allreduce bandwidth of Horovod (TensorFlow, the controller horovodrun
picked: Gloo or MPI; NCCL on GPU builds) across the ranks of one job.

For each message size, float32 tensors of that many bytes are summed with
hvd.allreduce: ``--warmup`` untimed rounds, then ``--iterations`` timed
ones, each timed on every rank.  An allreduce takes as long as its slowest
rank, so each iteration's time is the slowest rank's; the figure is the
median of those, so that one iteration slowed by another process on a
shared machine does not pull it down (a mean of five did: 0.13 GB/s beside
0.5 at the next size).  Bandwidths follow nccl-tests' definitions
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
algbw = bytes / seconds per allreduce, busbw = algbw x 2(n-1)/n.  Rank 0
prints one line ``REFARCH_RESULT {json}`` with world_size, hosts and
sizes: [{bytes, seconds (median per allreduce), iteration_seconds (each
timed allreduce, the slowest rank's), algbw_Bps, busbw_Bps}] (bandwidths
in bytes/s).
"""

import argparse
import json
import socket
import statistics
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-mib", default="1,16,64", help="comma-separated message sizes in MiB")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=5)
    return p.parse_args()


def main():
    args = parse_args()
    import tensorflow as tf
    import horovod.tensorflow as hvd

    hvd.init()
    n = hvd.size()
    sizes = []
    for mib in (float(s) for s in args.sizes_mib.split(",")):
        count = int(mib * (1 << 20)) // 4
        tensor = tf.ones([count], dtype=tf.float32)
        for i in range(args.warmup):
            hvd.allreduce(tensor, op=hvd.Sum, name=f"warmup.{mib}.{i}").numpy()
        times = []
        for i in range(args.iterations):
            start = time.perf_counter()
            hvd.allreduce(tensor, op=hvd.Sum, name=f"timed.{mib}.{i}").numpy()
            times.append(time.perf_counter() - start)
        # Each iteration as long as its slowest rank took.
        times = [float(t) for t in hvd.allreduce(tf.constant(times), op=hvd.Max, name=f"time.{mib}").numpy()]
        seconds = statistics.median(times)
        algbw = count * 4 / seconds
        sizes.append({"bytes": count * 4, "seconds": seconds, "iteration_seconds": times, "algbw_Bps": algbw,
                      "busbw_Bps": algbw * 2 * (n - 1) / n})
    hosts = hvd.allgather_object(socket.gethostname())
    if hvd.rank() == 0:
        print("REFARCH_RESULT " + json.dumps({"world_size": n, "hosts": hosts, "sizes": sizes}), flush=True)


if __name__ == "__main__":
    main()
