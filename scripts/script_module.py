"""Loads one of scripts/' extensionless programs (page_commands, check_layers ...) as a module,
so that its tests call its functions directly."""

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

sys.dont_write_bytecode = True  # keep scripts/ free of __pycache__


def load(name: str) -> ModuleType:
    """scripts/<name> as the module <name>."""
    path = Path(__file__).resolve().parent / name
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    return module
