#!/usr/bin/env python3
"""Tests of scripts/notebook_lib.py and of the committed notebooks:  python3 scripts/test_notebook_lib.py

run_json meets a stand-in program (a shell script that writes its --json file, or fails); the
notebooks in notebooks/ must be committed unexecuted (scripts/test executes them into the docs)
and must find their programs through notebook_lib, not a path of one machine.
"""

import json
import os
import shutil
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from unittest import mock

sys.dont_write_bytecode = True
SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import notebook_lib  # noqa: E402

NOTEBOOKS = SCRIPTS.parent / "notebooks"


class RunJsonTest(unittest.TestCase):
    def setUp(self):
        self.build = Path(tempfile.mkdtemp(prefix="test-notebook-lib."))
        (self.build / "steps").mkdir()
        self.env = mock.patch.dict(os.environ, {"PAGEDATTN_BUILD_DIR": str(self.build)})
        self.env.start()

    def tearDown(self):
        self.env.stop()
        shutil.rmtree(self.build)

    def stand_in(self, name, body):
        path = self.build / "steps" / name
        path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
        path.chmod(0o755)

    def test_reads_the_json_the_program_wrote(self):
        self.stand_in("step07_x", """\
            for arg; do last="$arg"; done
            printf '{"args": "%s", "results": [{"num_splits": 4}]}' "$1 $2" > "$last"
            """)
        result = notebook_lib.run_json("step07_x", "--splits", "4")
        self.assertEqual(result["results"][0]["num_splits"], 4)
        self.assertEqual(result["args"], "--splits 4")

    def test_a_failing_program_raises_with_its_last_lines(self):
        self.stand_in("step07_x", """\
            echo "step07_x: head_dim: expected a multiple of 8, got 100" >&2
            exit 3
            """)
        with self.assertRaises(RuntimeError) as caught:
            notebook_lib.run_json("step07_x", "--head-dim", "100")
        self.assertIn("exited 3", str(caught.exception))
        self.assertIn("expected a multiple of 8", str(caught.exception))

    def test_an_allowed_exit_code_is_read(self):
        self.stand_in("step10_x", """\
            for arg; do last="$arg"; done
            echo '{"results": [{"refused": true}]}' > "$last"
            exit 3
            """)
        self.assertTrue(notebook_lib.run_json("step10_x", ok_codes=(0, 3))["results"][0]["refused"])

    def test_a_program_not_built_says_how_to_build_it(self):
        with self.assertRaises(FileNotFoundError) as caught:
            notebook_lib.program("step99_nothing")
        self.assertIn("scripts/tour", str(caught.exception))


class StampTest(unittest.TestCase):
    def test_cpu_and_gpu_lines(self):
        cpu = {"cpu": "AMD EPYC x2", "compiler": "g++ 12.2.0", "cuda_compiler": "", "git_revision": "abc1234",
               "gpu": "", "gpu_details": ""}
        self.assertEqual(notebook_lib.stamp_line(cpu), "CPU AMD EPYC x2 | g++ 12.2.0 | rev abc1234")
        gpu = {**cpu, "gpu": "NVIDIA H200", "gpu_details": "132 SMs", "cuda_compiler": "13.0.88"}
        self.assertEqual(notebook_lib.stamp_line(gpu), "NVIDIA H200 (132 SMs) | g++ 12.2.0, nvcc 13.0.88 | rev abc1234")
        self.assertEqual(notebook_lib.stamp_line(None), "no stamp")


class CommittedNotebooksTest(unittest.TestCase):
    def test_at_least_three_notebooks(self):
        self.assertGreaterEqual(len(list(NOTEBOOKS.glob("*.ipynb"))), 3)

    def test_committed_unexecuted_and_free_of_machine_paths(self):
        for book in sorted(NOTEBOOKS.glob("*.ipynb")):
            with self.subTest(book=book.name):
                cells = json.loads(book.read_text())["cells"]
                for cell in cells:
                    if cell["cell_type"] == "code":
                        self.assertEqual(cell.get("outputs"), [], "outputs are for scripts/test to make")
                        self.assertIsNone(cell.get("execution_count"))
                    source = "".join(cell["source"])
                    for path in ("/work/", "/home/", "/tmp/", "build/cpu", "build/cuda"):
                        self.assertNotIn(path, source)


if __name__ == "__main__":
    unittest.main()
