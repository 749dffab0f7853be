"""Convergence: the distributed training learns what one rank learns (the
``convergence`` section sets the digits workload, ``digits_convergence.py``).

The jobs are the digits runs at np=1 and np=N (fixture
``convergence_runs``, refarch.pytest.workloads).
"""

from __future__ import annotations

from pydantic import Field

from .base import Group, Measurement, Property, Strict, across_nodes


class Convergence(Strict):
    """The digits convergence workload (``digits_convergence.py``): the same
    global batch (images per step over all ranks) and learning rate at every
    world size."""

    epochs: int = Field(15, ge=1)
    """Passes over the training split of the digits convergence job at every world size."""
    global_batch_size: int = Field(32, ge=8)
    """Images per step over all ranks (each rank takes its share); must split evenly over the world size."""
    learning_rate: float = Field(0.1, gt=0)
    """Learning rate of the SGD optimizer, the same at every world size (digits_convergence.py --learning-rate)."""
    test_fraction: float = Field(0.2, gt=0, lt=1)
    """Fraction of scikit-learn's digits held out to measure convergence.test_accuracy."""
    seed: int = 42
    """Seed of the train/test split, the shuffling per epoch and each rank's initialisation (seed + rank)."""


def diverged_ranks(hashes: list[str]) -> list[int]:
    """Ranks whose weight hash differs from rank 0's (``hashes[r]`` is
    rank r's sha256)."""
    return [rank for rank, digest in enumerate(hashes) if digest != hashes[0]]


def loss_gap(loss_n: float, loss_1: float) -> float:
    """|loss_n - loss_1| / loss_1 (cross-entropy, unitless).

    Raises:
        ValueError: ``loss_1`` is not positive.
    """
    if loss_1 <= 0:
        raise ValueError(f"np=1 loss {loss_1} is not positive")
    return abs(loss_n - loss_1) / loss_1


def _runs(request) -> tuple[dict, int]:
    n = across_nodes(request)
    return request.getfixturevalue("convergence_runs"), n


def accuracy(request) -> Measurement:
    """convergence.test_accuracy of the np=N job."""
    runs, n = _runs(request)
    return Measurement(runs[n]["test_accuracy"], {
        "world_size": n, "test_samples": runs[n]["test_samples"], "log": runs[n].get("log"),
        "np1_test_accuracy": runs[1]["test_accuracy"]})


def diverged(request) -> Measurement:
    """convergence.ranks_diverged of the np=N job, naming each rank's node."""
    runs, n = _runs(request)
    hashes = runs[n]["weight_sha256"]
    diverged = diverged_ranks(hashes)
    hosts = runs[n]["hosts"]
    detail = ""
    if diverged:
        detail = (" (after training, the weights of " + ", ".join(f"rank {r} on {hosts[r]}" for r in diverged)
                  + f" differ from rank 0's on {hosts[0]}: the ranks did not average their gradients)")
    return Measurement(len(diverged), {"world_size": n, "weight_sha256": hashes, "hosts": hosts,
                                       "log": runs[n].get("log")}, detail)


def train_loss_gap(request) -> Measurement:
    """convergence.loss_gap between the np=N and the np=1 job."""
    runs, n = _runs(request)
    value = loss_gap(runs[n]["train_loss"], runs[1]["train_loss"])
    return Measurement(value, {"train_loss": {"1": runs[1]["train_loss"], str(n): runs[n]["train_loss"]},
                               "steps": runs[n]["steps"], "logs": [runs[1].get("log"), runs[n].get("log")]},
                       detail=f" (train loss np=1 {runs[1]['train_loss']:.4f}, np={n} {runs[n]['train_loss']:.4f})")


GROUP = Group("convergence", section=("convergence", Convergence), properties=(
    Property("test_accuracy", "ratio",
             "held-out accuracy on scikit-learn's digits after the distributed training at np=N", accuracy),
    Property("ranks_diverged", "ranks",
             "ranks whose weights after training differ (sha256 of the float32 bytes) from rank 0's",
             diverged),
    Property("loss_gap", "ratio",
             "|train loss(np=N) - train loss(np=1)| / train loss(np=1) after the same number of steps",
             train_loss_gap),
))
