#!/usr/bin/env python3
"""Tests of scripts/page_commands: which lines are commands, which are cheap, which exits fail,
and a run over a scratch tree whose "programs" are shell scripts."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import script_module  # noqa: E402

SCRIPT = Path(__file__).resolve().parent / "page_commands"
pc = script_module.load("page_commands")

PAGE = """# A page

```
cmake --build build/current --target step03_naive_decode
build/current/steps/step03_naive_decode --help          # the flags
PAGEDATTN_EMU_SHUFFLE=7 build/cpu/steps/step03_naive_decode
build/current/tests/test_steps "[step03]"
build/current/steps/bench03_naive_decode
build/current/steps/step03_naive_decode --adversarial
```

build/current/steps/step03_naive_decode --outside-a-block
"""


class ParseTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="pagedattn-page-commands-test-")
        self.root = Path(self.dir.name)
        (self.root / "README.md").write_text(PAGE, encoding="utf-8")

    def tearDown(self):
        self.dir.cleanup()

    def test_commands_are_the_build_programs_in_code_blocks(self):
        found = pc.commands(self.root)
        self.assertEqual([c.line for c in found], [5, 6, 7, 8, 9])
        self.assertEqual(found[0].argv, ["build/current/steps/step03_naive_decode", "--help"])
        self.assertEqual(found[0].text, "build/current/steps/step03_naive_decode --help")
        self.assertEqual(found[1].env, {"PAGEDATTN_EMU_SHUFFLE": "7"})
        self.assertEqual(found[2].argv[1], "[step03]")

    def test_cheap_leaves_out_tests_benchmarks_and_big_workloads(self):
        self.assertEqual([pc.is_cheap(c) for c in pc.commands(self.root)], [True, True, False, False, False])

    def test_which_exits_fail(self):
        step = pc.Command("p", 1, "", {}, ["build/current/steps/step03_naive_decode"])
        runner = pc.Command("p", 1, "", {}, ["build/current/exercises/exercise", "01"])
        self.assertIsNone(pc.failure(step, 0))
        self.assertIsNone(pc.failure(step, 3))  # a refusal the page shows
        for code in (1, 2, 4, 127, -11):
            self.assertIsNotNone(pc.failure(step, code), code)
        self.assertIsNone(pc.failure(runner, 4))  # a broken exercise faults on purpose
        self.assertIsNotNone(pc.failure(runner, 2))

    def test_run_names_what_did_not_run(self):
        build = self.root / "build-dir"
        (build / "steps").mkdir(parents=True)
        (build / "CMakeCache.txt").write_text("", encoding="utf-8")
        program = build / "steps" / "step03_naive_decode"
        # Takes --help; any other flag is a bad flag (exit 2), as the step programs do.
        program.write_text('#!/bin/sh\n[ "$1" = --help ] || [ -z "$1" ] || exit 2\n'
                           '[ "$PAGEDATTN_EMU_SHUFFLE" = 7 ] || [ -z "$PAGEDATTN_EMU_SHUFFLE" ] || exit 1\n',
                           encoding="utf-8")
        os.chmod(program, 0o755)
        result = subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), "run", str(build)],
                                capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("2 of 2 cheap commands ran as written (of 5 on the pages)", result.stdout)
        (self.root / "README.md").write_text(PAGE.replace("--help ", "--hlep "), encoding="utf-8")
        result = subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), "run", str(build)],
                                capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("README.md:5: build/current/steps/step03_naive_decode --hlep: exit 2", result.stderr)
        # A program that is there but cannot run is a finding with its reason, not a traceback.
        (self.root / "README.md").write_text(PAGE, encoding="utf-8")
        os.chmod(program, 0o644)
        result = subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), "run", str(build)],
                                capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertIn("step03_naive_decode --help: " + str(program) + " cannot run: ", result.stderr)


if __name__ == "__main__":
    unittest.main()
