#!/usr/bin/env python3
"""Elastic training workload for TensorFlow 2 + Horovod (Gloo).

Trains the digits classifier of digits_convergence.py under
``hvd.elastic.run`` with a ``TensorFlowKerasState`` committed every
``--commit-every`` steps, after the pattern of Horovod's
examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py.  When a worker
fails, the survivors restore the last commit and go on at the smaller world
size; when hosts are added, the new world syncs from rank 0.

It trains until a rank sees ``--until-file`` (at most ``--max-steps`` steps; the
ranks agree on the step they stop at),
sleeping ``--step-sleep`` seconds per step so that nodes can leave and
rejoin meanwhile.  Rank 0 prints per step one line ``REFARCH_STEP {json}``
(t: its clock in seconds since the epoch, step, size, hosts at the last
reset) and, at the end, ``REFARCH_RESULT {json}`` (steps, resets, world
sizes seen, final test accuracy).
"""

import argparse
import json
import os
import socket
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--until-file", required=True)
    p.add_argument("--max-steps", type=int, default=5000)
    p.add_argument("--commit-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.1)
    p.add_argument("--global-batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def main():
    args = parse_args()
    import numpy as np
    import tensorflow as tf
    import horovod.tensorflow as hvd
    import digits_model

    digits_model.one_thread_per_op(tf)
    hvd.init()
    x, y = digits_model.load()
    model, opt, loss_fn = digits_model.build(tf, args.learning_rate)

    @tf.function
    def training_step(images, labels, allreduce=True):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        if allreduce:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Build the model and the optimizer's state before the first sync.
    training_step(tf.constant(x[:2]), tf.constant(y[:2]), allreduce=False)
    seen = {"resets": 0, "sizes": []}

    def batch(step):
        local = max(1, args.global_batch_size // hvd.size())
        rng = np.random.default_rng(args.seed + step * 1000 + hvd.rank())
        idx = rng.integers(0, len(x), local)
        return tf.constant(x[idx]), tf.constant(y[idx])

    def told_to_stop():
        """Whether any rank sees ``--until-file``, agreed by every rank (an
        allreduce): all stop at the same step.  Each rank reading the file on
        the shared storage by itself saw it up to a second apart; one then
        ended while the others waited in their next allreduce, and the
        elastic driver, on that first success, terminated them (exit 143:
        the job failed)."""
        seen_here = tf.constant(1.0 if os.path.exists(args.until_file) else 0.0)
        return float(hvd.allreduce(seen_here, op=hvd.Max, name="refarch_until_file")) > 0

    @hvd.elastic.run
    def train(state):
        hosts = hvd.allgather_object(socket.gethostname())
        if not seen["sizes"] or seen["sizes"][-1] != hvd.size():
            seen["sizes"].append(hvd.size())
        while state.step < args.max_steps and not told_to_stop():
            training_step(*batch(state.step))
            if hvd.rank() == 0:
                print("REFARCH_STEP " + json.dumps({"t": time.time(), "step": state.step, "size": hvd.size(),
                                                    "hosts": hosts}), flush=True)
            state.step += 1
            if state.step % args.commit_every == 0:
                state.commit()
            time.sleep(args.step_sleep)

    def on_reset():
        seen["resets"] += 1

    state = hvd.elastic.TensorFlowKerasState(model, opt, step=0)
    state.register_reset_callbacks([on_reset])
    train(state)
    if hvd.rank() == 0:
        accuracy = float((model(x, training=False).numpy().argmax(axis=1) == y).mean())
        print("REFARCH_RESULT " + json.dumps({"steps": state.step, "resets": seen["resets"], "sizes": seen["sizes"],
                                              "accuracy": accuracy}), flush=True)


if __name__ == "__main__":
    main()
