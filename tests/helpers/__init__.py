"""What tests share besides fixtures, one module per concept (tests/README.md
lists them). Imported as ``helpers.<module>``: pytest puts tests/ on
``sys.path`` (``pythonpath`` in pyproject.toml)."""
