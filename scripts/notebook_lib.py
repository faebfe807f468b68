"""What the notebooks share: where the built programs are, running one with --json, the stamp.

The notebooks in notebooks/ run the learner's own build: the step programs of the folder the
scripts built (`build/current`, or $PAGEDATTN_BUILD_DIR, which scripts/test sets), each with
`--json` into a scratch file that is read back and removed. Every figure says which machine and
revision its numbers came from (`stamp_line`, the same line the programs print).

Standard library only (the notebooks bring matplotlib).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterable, Optional

ROOT = Path(os.environ.get("PAGEDATTN_ROOT") or Path(__file__).resolve().parent.parent).resolve()

# The kernel step programs' exit codes (harness/harness.h, kernel_step_main): 0 ok, 3 refused.
OK_EXIT_CODES = (0,)


def build_dir() -> Path:
    """The build folder whose programs the notebooks run: $PAGEDATTN_BUILD_DIR, else build/current."""
    return Path(os.environ.get("PAGEDATTN_BUILD_DIR") or ROOT / "build" / "current")


def program(name: str) -> Path:
    """The built program `name` (step07_split_kv, step01_paged_cache ...). Raises FileNotFoundError
    saying how to build it when it is not there."""
    path = build_dir() / "steps" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not built: run scripts/tour (or scripts/test) first, "
                                f"or set PAGEDATTN_BUILD_DIR to a build folder")
    return path


def run_json(name: str, *args: str, ok_codes: Iterable[int] = OK_EXIT_CODES) -> Dict:
    """Runs the program `name` with `args` and `--json FILE`; returns the parsed file. Raises
    RuntimeError with the program's last lines when it exits with a code not in `ok_codes`."""
    with tempfile.TemporaryDirectory(prefix="pagedattn-notebook.") as scratch:
        out = Path(scratch) / "result.json"
        command = [str(program(name)), *args, "--json", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode not in tuple(ok_codes) or not out.is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise RuntimeError(f"{name} {' '.join(args)} exited {done.returncode}:\n{tail}")
        return json.loads(out.read_text())


def stamp_line(stamp: Optional[Dict]) -> str:
    """One line from a program's JSON stamp, as Stamp::line prints it:
    "CPU AMD EPYC x2 | g++ 12.2.0 | rev abc1234" (the GPU and its details instead of the CPU when
    a GPU ran)."""
    if not stamp:
        return "no stamp"
    where = f"{stamp['gpu']} ({stamp.get('gpu_details', '')})" if stamp.get("gpu") else f"CPU {stamp.get('cpu', '?')}"
    compiler = stamp.get("compiler", "?")
    if stamp.get("cuda_compiler"):
        compiler += f", nvcc {stamp['cuda_compiler']}"
    return f"{where} | {compiler} | rev {stamp.get('git_revision', '?')}"
