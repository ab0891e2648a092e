"""The package imports in one direction: public API -> transports and
service -> wire -> core, and ``import resound`` loads neither grpc nor
protobuf.

Every import counts, at module level, inside functions and under
TYPE_CHECKING: a type-only import that goes upward is how the circle of
client, server and transports held together before. Read from the source
with ``ast``, so the check needs no import of the modules it checks.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

import resound

PACKAGE = pathlib.Path(resound.__file__).parent

# The public API on top: the client, the server, writers, datasets and the
# commands. Nothing below them may import them.
API = (
    "resound",  # the package itself: `import resound` runs all of the API
    "resound.__main__",
    "resound._samples",
    "resound.batch_iterator",
    "resound.client",
    "resound.datasets",
    "resound.legacy_writer",
    "resound.server",
    "resound.server_command",
    "resound.stats_view",
    "resound.structured_writer",
    "resound.trajectory_writer",
)
TRANSPORT = ("resound._transport",)
SERVICE = ("resound._service",)
WIRE = ("resound._wire", "resound._proto")
# What each lower layer must not import (its own package's modules aside).
FORBIDDEN = {
    TRANSPORT: API + SERVICE,
    SERVICE: API + TRANSPORT,
    WIRE: API + TRANSPORT + SERVICE,
}
# The leaf modules every layer may use (tables, infos, errors, specs, ...)
# must not reach up either.
LEAVES = (
    "resound._checks",
    "resound._codec",
    "resound._table_host",
    "resound.errors",
    "resound.item_selectors",
    "resound.nest",
    "resound.priority_histogram",
    "resound.rate_limiters",
    "resound.specs",
    "resound.table",
    "resound.table_info",
    "resound.tls",
    "resound.wait_warnings",
)


def _module_name(path: pathlib.Path) -> str:
    parts = ["resound", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(name: str) -> bool:
    return (PACKAGE.joinpath(*name.split(".")[1:]) / "__init__.py").exists()


def _module_exists(name: str) -> bool:
    """Whether ``name`` is a module of the package (source, stub or extension)."""
    relative = pathlib.Path(*name.split(".")[1:])
    if _is_package(name):
        return True
    return any((PACKAGE / relative.parent).glob(f"{relative.name}.*py*")) or any(
        (PACKAGE / relative.parent).glob(f"{relative.name}.*.so")
    )


def imports_of(path: pathlib.Path) -> set[str]:
    """Every resound module the module at ``path`` imports, wherever the import is."""
    return imports_in(path.read_text(), _module_name(path), path.name == "__init__.py")


def imports_in(source: str, name: str, is_package: bool = False) -> set[str]:
    """Every resound module the source of module ``name`` imports."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # `from resound import client` imports the module resound.client;
            # `from resound.client import Client` a name of resound.client.
            for alias in node.names:
                if _module_exists(f"{module}.{alias.name}"):
                    found.add(f"{module}.{alias.name}")
                else:
                    found.add(module)
    return {m for m in found if m == "resound" or m.startswith("resound.")}


def _within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one ("resound"
    itself stands for the package's __init__ only)."""
    return any(module == p or (p != "resound" and module.startswith(p + ".")) for p in packages)


def _import_graph() -> dict[str, set[str]]:
    return {_module_name(path): imports_of(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in graph.items():
        for layer, forbidden in FORBIDDEN.items():
            if not _within(module, layer):
                continue
            found += [
                f"{module} imports {target}"
                for target in sorted(imported)
                if _within(target, forbidden) and not _within(target, layer)
            ]
        if module in LEAVES:
            found += [
                f"{module} (a leaf module) imports {target}"
                for target in sorted(imported)
                if _within(target, API + TRANSPORT + SERVICE)
            ]
    return found


def test_the_layers_import_downward_only() -> None:
    graph = _import_graph()
    assert "resound._transport.factory" in graph  # the walk found the package
    assert _violations(graph) == []


def _unit(module: str) -> str:
    """The package or top-level module ``module`` belongs to (resound.client,
    resound._transport, ...): the units the layers are made of."""
    return ".".join(module.split(".")[:2])


def test_there_is_no_import_circle() -> None:
    """No package or top-level module reaches itself through the imports
    of others (within one, modules may refer to each other's types)."""
    units: dict[str, set[str]] = {}
    for module, imported in _import_graph().items():
        targets = units.setdefault(_unit(module), set())
        targets.update(_unit(t) for t in imported if t != "resound")
    for unit, targets in units.items():
        targets.discard(unit)
    circles = []
    for start in units:
        stack, seen = [(start, [start])], set()
        while stack:
            unit, path = stack.pop()
            for target in sorted(units.get(unit, ())):
                if target == start:
                    circles.append(" -> ".join([*path, start]))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, [*path, target]))
    assert circles == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("resound._transport.x", "def f():\n    from resound.client import Client\n", "client"),
        ("resound._transport.x", "from resound import server\n", "server"),
        ("resound._transport.x", "from .. import client\n", "client"),
        ("resound._service.x", "from resound.server import Server\n", "server"),
        (
            "resound._service.x",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from resound._transport.remote import RemoteTransport\n",
            "_transport",
        ),
        ("resound._wire.x", "import resound.client\n", "client"),
        ("resound.table", "from resound._transport import factory\n", "_transport"),
    ],
)
def test_the_check_catches_an_upward_import(module: str, source: str, expected: str) -> None:
    violations = _violations({module: imports_in(source, module)})
    assert len(violations) == 1
    assert expected in violations[0]


def _loaded_after(code: str) -> list[str]:
    """The grpc and protobuf modules a fresh interpreter has loaded after ``code``."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import sys
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google')))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our own list


def test_import_resound_loads_neither_grpc_nor_protobuf() -> None:
    assert _loaded_after("import resound") == []


def test_an_embedded_server_and_its_clients_load_neither_grpc_nor_protobuf() -> None:
    code = """
        import numpy as np
        import resound

        server = resound.Server([resound.Table.queue('q', 100)], listen=False)
        client = server.in_process_client()
        client.insert({'x': np.zeros(3)}, priorities={'q': 1.0})
        with client.trajectory_writer(2) as writer:
            for step in range(4):
                writer.append({'x': np.full(3, step)})
                writer.create_item('q', 1.0, {'x': writer.history['x'][-2:]})
        list(client.sample('q', num_samples=2))
        client.sample_batch('q', 2)
        client.mutate_priorities('q', deletes=[1])
        server.stop()
        """
    assert _loaded_after(code) == []
