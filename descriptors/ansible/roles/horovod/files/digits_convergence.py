#!/usr/bin/env python3
"""Convergence workload for TensorFlow 2 + Horovod on a real dataset.

Trains a small classifier (64 -> 64 ReLU -> 10) on scikit-learn's digits
dataset (1,797 8x8 images of handwritten digits, shipped inside the package,
no download) with horovod.tensorflow's DistributedGradientTape, one rank per
process.  The global batch (``--global-batch-size`` images per step, split
evenly over the ranks) and the learning rate do not change with the world
size, so np=N with gradient averaging follows the same trajectory as np=1
up to the order in which samples meet in a batch.

Every rank starts from rank 0's initial weights (broadcast), trains on its
shard of the training split (sample i goes to rank i mod world size) and,
at the end, hashes its weights (sha256 of the float32 bytes); the hashes are
gathered.  Every rank reports its progress after each epoch
(rank_progress.py).  Rank 0 prints one line ``REFARCH_RESULT {json}`` with:
  world_size, hosts (one hostname per rank), weight_sha256 (one per rank),
  test_accuracy (fraction of the held-out split classified right),
  train_loss (mean cross-entropy over the whole training split, final
  weights), epochs, steps, global_batch_size, learning_rate, seconds
  (training only), train_samples, test_samples.
"""

import argparse
import hashlib
import json
import socket
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--global-batch-size", type=int, default=32, help="images per step over all ranks")
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def main():
    args = parse_args()
    import numpy as np
    import tensorflow as tf
    import horovod.tensorflow as hvd
    from sklearn.model_selection import train_test_split

    import digits_model
    import rank_progress

    rank_progress.report("start")
    digits_model.one_thread_per_op(tf)
    hvd.init()
    rank_progress.report("init")
    if args.global_batch_size % hvd.size():
        raise SystemExit(f"--global-batch-size {args.global_batch_size} does not split over {hvd.size()} ranks")
    local_batch = args.global_batch_size // hvd.size()

    x, y = digits_model.load()
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=args.test_fraction, random_state=args.seed, stratify=y)
    shard_x, shard_y = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    steps_per_epoch = len(x_train) // args.global_batch_size

    # A different initialisation per rank: only the broadcast makes them equal.
    tf.random.set_seed(args.seed + hvd.rank())
    model, opt, loss_fn = digits_model.build(tf, args.learning_rate)
    rank_progress.report("ready")
    hvd.broadcast_variables(model.variables, root_rank=0)

    @tf.function
    def step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # A line per epoch (hundreds of steps of a few milliseconds each).

    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = np.random.default_rng(args.seed + epoch).permutation(len(shard_x))
        for i in range(steps_per_epoch):
            idx = order[i * local_batch:(i + 1) * local_batch]
            step(tf.constant(shard_x[idx]), tf.constant(shard_y[idx]))
        rank_progress.report("step", (epoch + 1) * steps_per_epoch)
    seconds = time.perf_counter() - start

    weights = b"".join(np.ascontiguousarray(w, dtype="float32").tobytes() for w in model.get_weights())
    hashes = hvd.allgather_object(hashlib.sha256(weights).hexdigest())
    hosts = hvd.allgather_object(socket.gethostname())
    if hvd.rank() == 0:
        logits = model(x_test, training=False).numpy()
        result = {
            "world_size": hvd.size(),
            "hosts": hosts,
            "weight_sha256": hashes,
            "test_accuracy": float((logits.argmax(axis=1) == y_test).mean()),
            "train_loss": float(loss_fn(y_train, model(x_train, training=False)).numpy()),
            "epochs": args.epochs,
            "steps": args.epochs * steps_per_epoch,
            "global_batch_size": args.global_batch_size,
            "learning_rate": args.learning_rate,
            "seconds": round(seconds, 2),
            "train_samples": len(x_train),
            "test_samples": len(x_test),
        }
        print("REFARCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
