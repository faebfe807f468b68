#!/usr/bin/env python3
"""Tests of scripts/check_layers: a tree whose includes point down passes; each kind of include
against the layers is found, with its file and line."""

import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import script_module  # noqa: E402

cl = script_module.load("check_layers")


class LayersTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory(prefix="pagedattn-layers-test-")
        self.root = Path(self.scratch.name)
        self.write("common/problem.h", '#include <vector>\n#include "common/error.h"\n')
        self.write("kernels/06.cuh", '#include "common/problem.h"\n#include "kernels/portable/portable.h"\n')
        self.write("reference/oracle.h", '#include "common/problem.h"\n')
        self.write("harness/harness.h", '#include "kernels/06.cuh"\n#include "reference/oracle.h"\n')
        self.write("steps/06/main.cpp", '#include "harness/harness.h"\n#include "api/decode.h"\n')

    def tearDown(self):
        self.scratch.cleanup()

    def write(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def test_includes_that_point_down_pass(self):
        self.assertEqual(cl.findings(self.root), [])
        self.assertEqual(cl.main(["--root", str(self.root)]), 0)

    def test_each_include_against_the_layers_is_found(self):
        self.write("common/report.cpp", '#include "common/report.h"\n\n#include "harness/harness.h"\n')
        self.write("kernels/07.cuh", '#include "reference/oracle.h"\n')
        self.write("harness/bench.cpp", '#include "api/decode.h"\n')
        found = cl.findings(self.root)
        self.assertEqual(len(found), 3, found)
        self.assertTrue(found[0].startswith("common/report.cpp:3: common/ includes harness/harness.h"), found)
        self.assertIn("kernels/07.cuh:1: kernels/ includes reference/oracle.h", found[2] + found[1])
        self.assertTrue(any(line.startswith("harness/bench.cpp:1: harness/ includes api/decode.h") for line in found))
        self.assertEqual(cl.main(["--root", str(self.root)]), 1)

    def test_a_root_that_is_not_the_repository_is_bad_usage(self):
        with self.assertRaises(SystemExit) as stop:
            cl.main(["--root", str(self.root / "nosuch")])
        self.assertEqual(stop.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
