"""The command line, `python -m transformer COMMAND …`: one module per area of the package."""
from .main import build_parser, main

__all__ = ["main", "build_parser"]
