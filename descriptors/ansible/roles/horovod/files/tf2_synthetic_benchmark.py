#!/usr/bin/env python3
"""Synthetic-data training benchmark for TensorFlow 2 + Horovod.

Trains a Keras application model (default ResNet50) on random images with
horovod.tensorflow and a GradientTape, one rank per process.  Rank 0 prints
one line ``REFARCH_RESULT {json}`` with:
  world_size, hosts (one hostname per rank), gloo_ifaces (the interface
  horovodrun gave Gloo, per rank), batch_size (per rank),
  images_per_sec (total over all ranks, mean of the timed steps),
  images_per_sec_per_rank, step_times_s (list, seconds per timed step of
  the whole job), model, image_size, and with --baseline-rounds R > 0 at
  world size > 1: rounds (list of {"single_step_times_s": [...],
  "step_times_s": [...]}, in the order they ran).

Every rank reports its progress while it runs (rank_progress.py): each
step with the seconds until its own gradients were computed.

Baseline rounds: the timed steps are split into R rounds; each round first
times as many steps of rank 0 training alone (its own gradients, no
allreduce: what np=1 computes) while the other ranks wait, then the steps
of the whole job.  Both figures of a round are measured within seconds of
each other, so a machine whose speed changes shows the change in both
instead of in their ratio.  Rank 0's weights then differ from the others'
(it applied its own gradients): this benchmark measures speed only.
"""

import argparse
import json
import os
import socket
import time

import rank_progress


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="ResNet50")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16, help="images per rank per step")
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--intra-op-threads", type=int, default=1)
    p.add_argument("--baseline-rounds", type=int, default=0,
                   help="rounds of rank-0-alone steps interleaved with the job's steps (0: none)")
    return p.parse_args()


def main():
    args = parse_args()
    import tensorflow as tf
    import horovod.tensorflow as hvd

    rank_progress.report("start")
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()
    rank_progress.report("init")

    model_cls = getattr(tf.keras.applications, args.model)
    model = model_cls(weights=None, input_shape=(args.image_size, args.image_size, 3), classes=args.classes)
    opt = tf.keras.optimizers.SGD(learning_rate=0.01 * hvd.size())
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
    tf.random.set_seed(1234 + hvd.rank())
    images = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
    labels = tf.random.uniform([args.batch_size], maxval=args.classes, dtype=tf.int64)

    def averaged(grads):
        # What DistributedGradientTape does by default: one allreduce
        # (average) per gradient, fused by Horovod's background thread.
        return [hvd.allreduce(g, op=hvd.Average) for g in grads]

    # One traced step function for both kinds of step: a Python flag would
    # trace ResNet50's forward and backward pass twice (6-10 s of a 2-core
    # node); tf.cond runs one branch (Horovod's own allreduce uses tf.cond
    # the same way).  The first step creates the optimizer's state; rank
    # 0's weights and state then go to every rank, eagerly, before
    # anything is timed.
    @tf.function
    def step(together):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        # When this rank's own gradients are ready (before any wait for
        # the others): its compute time, reported per step.
        with tf.control_dependencies(grads):
            computed = tf.timestamp()
        grads = tf.cond(together, lambda: averaged(grads), lambda: list(grads))
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss, computed

    job_steps = [0]

    def run_step(together):
        # One step, reported: the job's steps numbered, with this rank's
        # compute seconds; rank 0's steps alone under the job's last
        # number, without (nobody waits in them).
        began = time.time()
        loss, computed = step(together)
        loss.numpy()
        compute_s = None
        if together is job:
            job_steps[0] += 1
            compute_s = float(computed.numpy()) - began
        rank_progress.report("step", job_steps[0], compute_s)

    def timed_steps(count, together):
        times = []
        for _ in range(count):
            start = time.perf_counter()
            run_step(together)
            times.append(time.perf_counter() - start)
        return times

    job, alone = tf.constant(True), tf.constant(False)
    rank_progress.report("ready")
    run_step(job)
    hvd.broadcast_variables(model.variables, root_rank=0)
    hvd.broadcast_variables(opt.variables(), root_rank=0)
    for _ in range(args.warmup_steps):
        run_step(job)
    rounds = []
    if args.baseline_rounds > 0 and hvd.size() > 1:
        if hvd.rank() == 0:
            run_step(alone)  # untimed: the branch's first run
        hvd.allreduce(tf.constant(0.0), name="refarch_round_start")
        count = min(args.baseline_rounds, args.steps)
        per_round = [args.steps // count + (1 if r < args.steps % count else 0) for r in range(count)]
        for r, n in enumerate(per_round):
            single = timed_steps(n, alone) if hvd.rank() == 0 else []
            # The others wait here while rank 0 trains alone.
            hvd.allreduce(tf.constant(0.0), name=f"refarch_round{r}")
            rounds.append({"single_step_times_s": [round(t, 4) for t in single],
                           "step_times_s": [round(t, 4) for t in timed_steps(n, job)]})
        times = [t for rnd in rounds for t in rnd["step_times_s"]]
    else:
        times = timed_steps(args.steps, job)
    per_rank = args.batch_size * len(times) / sum(times)
    total = hvd.allreduce(tf.constant(per_rank), op=hvd.Sum).numpy()
    hosts = hvd.allgather_object(socket.gethostname())
    # The interface horovodrun told Gloo to use on each rank.
    ifaces = hvd.allgather_object(os.environ.get("HOROVOD_GLOO_IFACE", ""))
    if hvd.rank() == 0:
        result = {
            "world_size": hvd.size(),
            "hosts": hosts,
            "gloo_ifaces": ifaces,
            "batch_size": args.batch_size,
            "images_per_sec": float(total),
            "images_per_sec_per_rank": float(total) / hvd.size(),
            "step_times_s": [round(t, 4) for t in times],
            "model": args.model,
            "image_size": args.image_size,
            "pid": os.getpid(),
        }
        if rounds:
            result["rounds"] = rounds
        print("REFARCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
