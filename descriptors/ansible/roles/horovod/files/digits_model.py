"""The digits classifier both digits workloads train (digits_convergence.py,
elastic_train.py): scikit-learn's digits scaled to [0, 1] and a
64 -> 64 ReLU -> 10 Keras model with its loss, one thread per op."""


def load():
    """(x, y): 1,797 images as float32 rows of 64 values in [0, 1], labels 0-9."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y


def one_thread_per_op(tf) -> None:
    """Call first, before TensorFlow runs anything: ranks share few cores."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def build(tf, learning_rate: float):
    """(model, optimizer, loss function) for ``tf`` (TensorFlow)."""
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    return (model, tf.keras.optimizers.SGD(learning_rate=learning_rate),
            tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
