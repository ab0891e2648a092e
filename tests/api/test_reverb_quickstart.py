"""Reverb code runs on resound: the "Quick Start" of Reverb's README
(github.com/google-deepmind/reverb, README.md) with `import resound as reverb`,
asserting on what each step returns instead of printing it; and every
docstring example of the resound package, run with doctest."""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
from types import ModuleType

import numpy as np
import pytest

import resound
import resound as reverb


def test_reverb_readme_quick_start() -> None:
    # Start a server.
    server = reverb.Server(
        tables=[
            reverb.Table(
                name="my_table",
                sampler=reverb.selectors.Uniform(),
                remover=reverb.selectors.Fifo(),
                max_size=100,
                rate_limiter=reverb.rate_limiters.MinSize(1),
            ),
        ],
    )

    # A client of the server.
    client = reverb.Client(f"localhost:{server.port}")
    info = client.server_info()
    assert list(info) == ["my_table"]
    assert info["my_table"].current_size == 0
    assert info["my_table"].max_size == 100

    # One item holding the data element [0, 1].
    client.insert([0, 1], priorities={"my_table": 1.0})

    # One item over three appended steps.
    with client.trajectory_writer(num_keep_alive_refs=3) as writer:
        writer.append({"a": 2, "b": 12})
        writer.append({"a": 3, "b": 13})
        writer.append({"a": 4, "b": 14})

        writer.create_item(
            table="my_table",
            priority=1.0,
            trajectory={
                "a": writer.history["a"][:],
                "b": writer.history["b"][:],
            },
        )

        writer.flush()

    info = client.server_info()["my_table"]
    assert info.current_size == 2
    assert info.rate_limiter_info.insert_stats.completed == 2

    # Sampling returns a generator.
    samples = list(client.sample("my_table", num_samples=2))

    assert len(samples) == 2
    seen_lengths = set()
    for sample in samples:
        assert isinstance(sample, list)  # one ReplaySample per timestep
        assert all(isinstance(step, reverb.ReplaySample) for step in sample)
        assert all(step.info == sample[0].info for step in sample)
        assert sample[0].info.probability == 0.5
        assert sample[0].info.table_size == 2
        assert sample[0].info.priority == 1.0
        values = [[np.asarray(x).item() for x in step.data] for step in sample]
        if len(sample) == 1:
            assert values == [[0, 1]]
        else:
            assert values == [[2, 12], [3, 13], [4, 14]]  # the columns a, b per step
        seen_lengths.add(len(sample))
    assert seen_lengths <= {1, 3}
    assert client.server_info()["my_table"].rate_limiter_info.sample_stats.completed == 2
    server.stop()


# --- docstring examples


def python_module(name: str) -> ModuleType | None:
    module = importlib.import_module(name)
    source = getattr(module, "__file__", None) or ""
    return module if source.endswith(".py") else None  # None for the compiled core


def package_modules() -> list[str]:
    """Every Python module of the installed package (not the compiled core)."""
    names = ["resound"]
    for found in pkgutil.walk_packages(resound.__path__, prefix="resound."):
        if not found.name.endswith("__main__") and python_module(found.name) is not None:
            names.append(found.name)
    return sorted(names)


def run_doctests(module: ModuleType) -> tuple[doctest.TestResults, str]:
    output = io.StringIO()
    runner = doctest.DocTestRunner(verbose=False)
    for test in doctest.DocTestFinder().find(module):
        runner.run(test, out=output.write)
    return runner.summarize(verbose=False), output.getvalue()


@pytest.mark.parametrize("name", package_modules())
def test_docstring_examples(name: str) -> None:
    module = python_module(name)
    assert module is not None
    results, report = run_doctests(module)
    assert results.failed == 0, report


def test_docstring_examples_are_found() -> None:
    # Guards the test above: these modules have examples, so the finder must run them.
    for name in ("resound", "resound.server", "resound.client", "resound.table", "resound.nest"):
        module = python_module(name)
        assert module is not None
        results, _ = run_doctests(module)
        assert results.attempted > 0, name
