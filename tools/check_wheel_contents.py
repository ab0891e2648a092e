"""Checks what a built resound-rl wheel holds, without installing it.

Usage: ``python tools/check_wheel_contents.py dist/resound_rl-*.whl``

The wheel must hold the source tree's ``python/resound`` exactly (every
module, ``_core.pyi`` and ``py.typed``; nothing else there but the one
compiled ``_core`` extension for the wheel's own Python), the license in its
``.dist-info``, and nothing outside those two folders (no tests, no build
tree). Its name and version must match ``pyproject.toml`` and
``python/resound/__init__.py``. tests/system/test_packaging.py checks the rest on
the installed distribution (metadata, both commands). Prints one line per
check; exits with status 1 naming every check that failed.

    $ python tools/check_wheel_contents.py dist/resound_rl-0.1.0-cp311-cp311-linux_x86_64.whl
    ok: the file is named for resound_rl (got resound_rl)
    ...
    resound_rl-0.1.0-cp311-cp311-linux_x86_64.whl: all checks passed
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "python" / "resound"
DISTRIBUTION = "resound_rl"  # the wheel's spelling of resound-rl (PEP 427)

# The extension's file name for each wheel Python tag: cp311 ->
# _core.cpython-311-<platform>.so (Linux, macOS).
EXTENSION = re.compile(r"_core\.cpython-(?P<version>\d+)[a-z]*-[\w-]+\.so")


def source_files() -> set[str]:
    """The files under python/resound a wheel must carry, as wheel paths."""
    return {
        str(PurePosixPath("resound", *path.relative_to(SOURCE).parts))
        for path in SOURCE.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in {".pyc", ".so"}  # an old in-place build's leftovers
    }


def source_version() -> str:
    """``__version__`` as python/resound/__init__.py writes it (one place)."""
    match = re.search(r'^__version__ = "([^"]+)"$', (SOURCE / "__init__.py").read_text(), re.M)
    if match is None:
        raise SystemExit(f"no __version__ line in {SOURCE / '__init__.py'}")
    return match.group(1)


def check(wheel_path: Path) -> list[str]:
    """Every failed check's description (empty when the wheel is right)."""
    failures: list[str] = []

    def report(ok: bool, what: str) -> None:
        print(("ok: " if ok else "FAILED: ") + what)
        if not ok:
            failures.append(what)

    # name-version(-build)-python-abi-platform.whl (PEP 427)
    parts = wheel_path.name[: -len(".whl")].split("-")
    name, version, python_tag = parts[0], parts[1], parts[-3]
    report(name == DISTRIBUTION, f"the file is named for {DISTRIBUTION} (got {name})")
    expected_version = source_version()
    report(version == expected_version, f"version {expected_version} (got {version})")

    with zipfile.ZipFile(wheel_path) as wheel:
        names = [info.filename for info in wheel.infolist() if not info.is_dir()]
        info_dir = f"{DISTRIBUTION}-{version}.dist-info"
        metadata = wheel.read(f"{info_dir}/METADATA").decode()
        licenses = {
            n: wheel.read(n)
            for n in names
            if n.startswith(f"{info_dir}/") and PurePosixPath(n).name == "LICENSE"
        }

    package = {n for n in names if n.startswith("resound/")}
    extensions = [n for n in package if EXTENSION.fullmatch(PurePosixPath(n).name)]
    report(
        len(extensions) == 1
        and EXTENSION.fullmatch(PurePosixPath(extensions[0]).name)["version"] == python_tag[2:],
        f"one compiled resound/_core for {python_tag} (got {extensions})",
    )
    expected = source_files()
    missing = sorted(expected - package)
    extra = sorted(package - expected - set(extensions))
    report(
        not missing and not extra,
        f"python/resound's {len(expected)} files, and the extension"
        + (f"; missing {missing}" if missing else "")
        + (f"; not in the source tree {extra}" if extra else ""),
    )
    for needed in ("resound/_core.pyi", "resound/py.typed"):
        report(needed in package, f"{needed} (type information)")
    report(
        list(licenses.values()) == [(ROOT / "LICENSE").read_bytes()],
        f"LICENSE in {info_dir}, the source tree's text (got {sorted(licenses)})",
    )
    elsewhere = sorted(n for n in names if not n.startswith(("resound/", f"{info_dir}/")))
    report(not elsewhere, f"nothing outside resound/ and {info_dir}/ (got {elsewhere[:10]})")
    junk = sorted(
        n
        for n in names
        if "__pycache__" in n or n.endswith((".pyc", ".o", ".a", ".cmake")) or "CMake" in n
    )
    report(not junk, f"no build leftovers (got {junk[:10]})")
    fields = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in metadata.splitlines()[:3]}
    report(
        fields.get("Name") == "resound-rl" and fields.get("Version") == expected_version,
        f"METADATA names resound-rl {expected_version} (got {fields})",
    )
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="the .whl file to check")
    args = parser.parse_args(argv)
    if not args.wheel.is_file():
        parser.error(f"wheel: {args.wheel} is not a file")
    if args.wheel.suffix != ".whl" or len(args.wheel.name.split("-")) not in (5, 6):
        parser.error(f"wheel: {args.wheel.name} is not named name-version-python-abi-platform.whl")
    failures = check(args.wheel)
    if failures:
        print(f"{args.wheel.name}: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"{args.wheel.name}: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
