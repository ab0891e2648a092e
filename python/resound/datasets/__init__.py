"""Learner-side adapters: resound's batched sample path as a framework's input.

Each adapter lives in its own module and imports its framework only when it
is used; ``import resound`` and ``import resound.datasets`` import none.

* ``resound.datasets.tf``: Reverb's ``TrajectoryDataset`` and
  ``TimestepDataset`` (``tf.data.Dataset``\\ s).
* ``resound.datasets.tf_client``: Reverb's ``TFClient`` (ops usable inside
  ``tf.function``).
* ``resound.datasets.tf_patterns``: Reverb's ``PatternDataset`` (structured
  writer patterns applied to a ``tf.data.Dataset``).
* ``resound.datasets.torch``: a PyTorch ``IterableDataset`` of batches.
* ``resound.datasets.jax``: an iterator of device arrays, prefetched.
"""
