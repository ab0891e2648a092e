"""A JAX learner on resound: actors write, the learner samples device batches.

Actor threads play a toy task (observations ``x``, rewards ``w . x`` plus
noise, for a ``w`` they do not know) and write each step as an item into a
prioritized table. The learner fits ``w`` with a jit'd SGD step on batches from
``resound.datasets.jax.DeviceIterator`` (sampled, stacked and put on the
device ahead of use, every batch exactly ``--batch-size`` samples), and writes
each sample's absolute error back as its priority, so badly fitted steps
come back more often. A ``SampleToInsertRatio`` rate limiter keeps the
learner from running ahead of the actors. Takes a few seconds:

    pip install "jax[cpu]" .                 # JAX, and resound from this repository
    python examples/jax_learner.py --steps 300

Pass ``--address host:port`` to learn from a running resound-server with a
table like ``make_table``'s (with its signature) instead of an embedded one.
"""

from __future__ import annotations

import argparse
import sys
import threading

import numpy as np

import resound

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    sys.exit('examples/jax_learner.py needs JAX, which is not installed: pip install "jax[cpu]"')

from resound.datasets.jax import DeviceIterator

TABLE = "replay"
DIMENSIONS = 8
TRUE_WEIGHTS = np.linspace(-1.0, 1.0, DIMENSIONS).astype(np.float32)


def make_table() -> resound.Table:
    return resound.Table(
        name=TABLE,
        sampler=resound.selectors.Prioritized(priority_exponent=0.6),
        remover=resound.selectors.Fifo(),
        max_size=10_000,
        signature={
            "x": resound.TensorSpec((DIMENSIONS,), np.float32),
            "reward": resound.TensorSpec((), np.float32),
        },
        # About 4 samples per inserted step; sampling starts at 256 items.
        rate_limiter=resound.rate_limiters.SampleToInsertRatio(
            samples_per_insert=4.0, min_size_to_sample=256, error_buffer=2048.0
        ),
    )


def act(client: resound.Client, seed: int, stop: threading.Event) -> None:
    """One actor: steps of the toy task, each an item, until ``stop``."""
    rng = np.random.default_rng(seed)
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    try:
        while not stop.is_set():
            x = rng.normal(size=DIMENSIONS).astype(np.float32)
            reward = np.float32(x @ TRUE_WEIGHTS + rng.normal(scale=0.05))
            writer.append({"x": x, "reward": reward})
            history = writer.history
            writer.create_item(
                TABLE,
                priority=1.0,
                trajectory={"x": history["x"][-1], "reward": history["reward"][-1]},
            )
            # The rate limiter holds items back while the learner is behind;
            # waiting in slices lets the actor see stop.
            try:
                writer.flush(timeout_ms=100)
            except resound.DeadlineExceededError:
                continue
    finally:
        writer.close()  # drops what the rate limiter still holds back


@jax.jit
def update(weights: jax.Array, x: jax.Array, reward: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One SGD step on the squared error; the new weights and each sample's
    absolute error (the new priorities)."""

    def loss(w: jax.Array) -> jax.Array:
        return jnp.mean((x @ w - reward) ** 2)

    gradient = jax.grad(loss)(weights)
    return weights - 0.1 * gradient, jnp.abs(x @ weights - reward)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="learner steps")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--address", help="a resound-server to use instead of an embedded one")
    args = parser.parse_args()

    server = None
    if args.address:
        client = resound.Client(args.address)
    else:
        server = resound.Server([make_table()], listen=False)
        client = server.in_process_client()
    stop = threading.Event()
    actors = [
        threading.Thread(target=act, args=(client, seed, stop), daemon=True)
        for seed in range(args.actors)
    ]
    for actor in actors:
        actor.start()

    weights = jnp.zeros(DIMENSIONS, jnp.float32)
    errors = []
    with DeviceIterator(
        client,
        TABLE,
        args.batch_size,
        num_batches=args.steps,
        drop_remainder=True,  # one shape: update() is traced once
        unpack_as_table_signature=True,  # data as {'x': ..., 'reward': ...}
    ) as batches:
        for step, batch in enumerate(batches):
            weights, error = update(weights, batch.data["x"], batch.data["reward"])
            # Keys stay exact uint64 numpy on the host; errors come back from the device.
            client.update_priorities(TABLE, (batch.info.key, np.asarray(error) + 1e-3))
            errors.append(float(jnp.mean(error)))
            if step % 50 == 0:
                print(f"step {step:4d}  mean |error| {errors[-1]:.4f}")

    stop.set()
    for actor in actors:
        actor.join()
    info = client.server_info()[TABLE]
    distance = float(jnp.linalg.norm(weights - TRUE_WEIGHTS))
    print(
        f"{len(errors)} steps of {args.batch_size}; mean |error| {errors[0]:.3f} -> "
        f"{errors[-1]:.3f}; |w - w_true| = {distance:.3f}; "
        f"table: {info.current_size} items, {info.num_unique_samples} sampled at least once"
    )
    if server is not None:
        server.stop()
    return 0 if errors[-1] < errors[0] else 1


if __name__ == "__main__":
    sys.exit(main())
