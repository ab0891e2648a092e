"""structured_writer.infer_signature given TensorFlow specs returns
tf.TensorSpecs (shapes, dtypes and names as Reverb's), usable as a table
signature; given other specs it returns resound.TensorSpecs without importing
TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import resound
from resound import structured_writer as sw

tf = pytest.importorskip("tensorflow")

STEP_SPEC = {
    "obs": tf.TensorSpec([3], tf.float32),
    "action": tf.TensorSpec([], tf.int32),
    "text": tf.TensorSpec([], tf.string),
}
REF = sw.create_reference_step(STEP_SPEC)  # flat: action, obs, text


def assert_tf_specs(got: object, want: object) -> None:
    """Same structure, and leaf by leaf tf.TensorSpecs equal in shape, dtype and name."""
    tf.nest.assert_same_structure(got, want)
    for got_spec, want_spec in zip(tf.nest.flatten(got), tf.nest.flatten(want), strict=True):
        assert type(got_spec) is tf.TensorSpec, got_spec
        assert got_spec.shape.as_list() == want_spec.shape.as_list()
        assert got_spec.dtype == want_spec.dtype
        assert got_spec.name == want_spec.name


def test_tf_step_specs_give_tf_specs():
    config = sw.create_config(
        {
            "obs": REF["obs"][-4:],
            "action": REF["action"][-1],
            "text": REF["text"][-2:],
            "every_other": [REF["obs"][-5::2]],
        },
        "t",
    )
    got = sw.infer_signature([config], STEP_SPEC)
    assert_tf_specs(
        got,
        {
            "action": tf.TensorSpec([], tf.int32, name="action"),
            "every_other": [tf.TensorSpec([3, 3], tf.float32, name="every_other/0")],
            "obs": tf.TensorSpec([4, 3], tf.float32, name="obs"),
            "text": tf.TensorSpec([2], tf.string, name="text"),
        },
    )


def test_configs_of_different_lengths_leave_the_time_axis_unknown():
    configs = [
        sw.create_config({"obs": REF["obs"][-2:]}, "t"),
        sw.create_config({"obs": REF["obs"][-3:]}, "t"),
    ]
    got = sw.infer_signature(configs, STEP_SPEC)
    assert_tf_specs(got, {"obs": tf.TensorSpec([None, 3], tf.float32, name="obs")})


def test_unknown_dimensions_and_ranks_of_the_step_spec_stay_unknown():
    step_spec = [tf.TensorSpec([None, 2], tf.float64), tf.TensorSpec(None, tf.uint8)]
    ref = sw.create_reference_step(step_spec)
    config = sw.create_config([ref[0][-4:], ref[1][-1]], "t")
    got = sw.infer_signature([config], step_spec)
    assert type(got[0]) is tf.TensorSpec and type(got[1]) is tf.TensorSpec
    assert got[0].shape.as_list() == [4, None, 2] and got[0].dtype == tf.float64
    assert got[1].shape.rank is None and got[1].dtype == tf.uint8


def test_tensors_and_mixed_leaves_give_tf_specs():
    step_spec = {"x": tf.zeros([2], tf.int64), "y": np.zeros([5], np.float32)}
    ref = sw.create_reference_step(step_spec)
    config = sw.create_config({"x": ref["x"][-3:], "y": ref["y"][-1]}, "t")
    got = sw.infer_signature([config], step_spec)
    assert_tf_specs(
        got,
        {
            "x": tf.TensorSpec([3, 2], tf.int64, name="x"),
            "y": tf.TensorSpec([5], tf.float32, name="y"),
        },
    )


def test_dtype_and_shape_mismatches_still_raise():
    step_spec = {"a": tf.TensorSpec([2], tf.float32), "b": tf.TensorSpec([2], tf.int32)}
    ref = sw.create_reference_step(step_spec)
    dtypes = [sw.create_config([ref["a"][-1]], "t"), sw.create_config([ref["b"][-1]], "t")]
    with pytest.raises(ValueError, match="multiple dtypes"):
        sw.infer_signature(dtypes, step_spec)
    shapes = [sw.create_config([ref["a"][-1]], "t"), sw.create_config([ref["a"][-2:]], "t")]
    with pytest.raises(ValueError, match="incompatible shapes"):
        sw.infer_signature(shapes, step_spec)


def test_the_inferred_signature_serves_as_a_table_signature():
    config = sw.create_config({"obs": REF["obs"][-2:], "action": REF["action"][-1]}, "t")
    signature = sw.infer_signature([config], STEP_SPEC)
    table = resound.Table.queue("t", 10, signature=signature)
    server = resound.Server([table], listen=False)
    try:
        client = server.in_process_client()
        with client.structured_writer([config]) as writer:
            for t in range(3):
                step = {"obs": np.full(3, t, np.float32), "action": np.int32(t), "text": b"x"}
                writer.append(step)
        assert_tf_specs(client.server_info()["t"].signature, signature)
        first = next(client.sample("t", emit_timesteps=False)).data
        np.testing.assert_array_equal(first[1], [[0, 0, 0], [1, 1, 1]])  # obs
        assert first[0] == 1  # action
    finally:
        server.stop()


def test_other_specs_give_resound_specs_without_importing_tensorflow():
    script = """
import sys
import numpy as np
import resound
from resound import structured_writer as sw
ref = sw.create_reference_step({'x': None})
config = sw.create_config({'x': ref['x'][-2:]}, 't')
for step_spec in ({'x': np.zeros(3, np.float32)}, {'x': resound.TensorSpec([3], np.float32)}):
    spec = sw.infer_signature([config], step_spec)['x']
    assert type(spec) is resound.TensorSpec, type(spec)
    assert spec == resound.TensorSpec([2, 3], np.float32, 'x'), spec
assert 'tensorflow' not in sys.modules
print('ok')
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
