#!/usr/bin/env python3
"""Tests of scripts/results and scripts/results_lib.py:  python3 scripts/test_results.py

Everything runs on small synthetic Google Benchmark files written to a temporary tree; nothing
is written into docs/results/ or the real READMEs.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import results_lib as rl  # noqa: E402
from test_ladder import LadderTest, RepositoryLadderTest  # noqa: E402,F401  (the ladder regions, run here too)

SCRIPT = SCRIPTS / "results"

KERNELS = {2: "step02_pretend_programs", 3: "step03_naive_decode", 4: "step04_block_threads", 7: "step07_split_kv",
           8: "step08_gqa_sharing", 9: "step09_memory_pipeline"}


# ----------------------------------------------------------------------------------------------
# Synthetic bench_ladder output


def gpu_context(date="2026-11-30T10:00:00+00:00", rev="abc1234", roof="4570.3", datasheet="4800.0"):
    return {"date": date, "host_name": "gpu-host", "num_cpus": 16, "gpu": "NVIDIA H200",
            "gpu_details": "132 SMs, driver 580.1", "roof_gbps": roof, "datasheet_gbps": datasheet,
            "sm_count": "132", "git_revision": rev, "compiler": "g++ 12.2.0", "cuda_compiler": "13.0.88",
            "build_flags": "CUDA architectures 90", "pagedattn_stamp": "NVIDIA H200 | g++ | rev " + rev}


def gpu_bench(step, workload, ms, gbps, bytes_=1e9, roof=4570.3, datasheet=4800.0):
    name = f"{KERNELS[step]}/gpu/{workload}/iterations:1/manual_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "family_index": 0,
            "per_family_instance_index": 0, "repetitions": 1, "repetition_index": 0, "threads": 1,
            "iterations": 1, "real_time": ms, "cpu_time": 0.01, "time_unit": "ms", "GB/s": gbps,
            "roof_GB/s": roof, "pct_roof": 100 * gbps / roof, "pct_datasheet": 100 * gbps / datasheet,
            "bytes": bytes_, "runs": 20, "max_abs_error": 1e-3}


def refused_bench(step, workload, message="refused: context 32768 needs 128 KiB of shared memory"):
    name = f"{KERNELS[step]}/gpu/{workload}/iterations:1/manual_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "iterations": 0, "real_time": 0.0,
            "cpu_time": 0.0, "time_unit": "ms", "error_occurred": True, "error_message": message}


def traffic_bench(step, workload, predicted):
    name = f"{KERNELS[step]}/traffic/{workload}/iterations:1"
    return {"name": name, "run_name": name, "run_type": "iteration", "iterations": 1, "real_time": 50.0,
            "cpu_time": 50.0, "time_unit": "ms", "predicted_bytes": predicted, "scale": 1024.0}


def gpu_run(date="2026-11-30T10:00:00+00:00", rev="abc1234", slow=1.0):
    """Steps 02-04 on gqa-batch and long-single (step 04 refuses it), plus a two-point sweep."""
    benches = [
        gpu_bench(2, "gqa-batch", 8.0 * slow, 125.0), gpu_bench(2, "long-single", 4.0 * slow, 50.0),
        gpu_bench(3, "gqa-batch", 2.0 * slow, 500.0), gpu_bench(3, "long-single", 1.0 * slow, 200.0),
        gpu_bench(4, "gqa-batch", 0.5 * slow, 2000.0), refused_bench(4, "long-single"),
    ]
    for step, base in ((2, 1.0), (3, 0.25), (4, 0.0625)):
        benches.append(gpu_bench(step, "sweep-512", base * slow, 100.0))
        benches.append(gpu_bench(step, "sweep-1024", 2 * base * slow, 100.0))
    return {"context": gpu_context(date=date, rev=rev), "benchmarks": benches}


def bare_bench(workload, pattern, ms, gbps, datasheet=4800.0):
    name = f"bare_read/gpu/{workload}/{pattern}/iterations:1/manual_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "iterations": 1, "real_time": ms,
            "cpu_time": 0.01, "time_unit": "ms", "GB/s": gbps, "pct_datasheet": 100 * gbps / datasheet,
            "readers": 1 if pattern == "once" else 4}


def traffic_run():
    context = {"date": "2026-11-29T09:00:00+00:00", "host_name": "cpu", "git_revision": "abc1234",
               "gpu": "none: no CUDA device"}
    tour = {"name": "step03_naive_decode/emulator/tour", "run_name": "step03_naive_decode/emulator/tour",
            "run_type": "iteration", "iterations": 40, "real_time": 15.0, "cpu_time": 15.0, "time_unit": "ms",
            "emu_bytes": 2.0e6, "bytes_moved": 3.6e5}
    return {"context": context, "benchmarks": [
        tour,
        traffic_bench(2, "gqa-batch", 4.5703e9), traffic_bench(3, "gqa-batch", 1.82812e9),
        traffic_bench(4, "gqa-batch", 0.91406e9), traffic_bench(3, "long-single", 1.0e8),
    ]}


STEP_PAGE = "# Step {nn}\n\nIntro text.\n\n<!-- results:begin -->\n(placeholder)\n<!-- results:end -->\n\nAfter.\n"
README = "# pagedattn\n\nBefore.\n\n## Results\n\n<!-- results:begin -->\nold text\n<!-- results:end -->\n\nAfter.\n"


class Tree:
    """A scratch repository: README.md, three step pages (one without markers), docs/results/."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="pagedattn-results-test-")
        self.root = Path(self.dir.name)
        self.results = self.root / "docs" / "results"
        self.results.mkdir(parents=True)
        (self.root / "README.md").write_text(README, encoding="utf-8")
        for folder, bench in (("02_pretend_programs", "PA_STEP_BENCHMARK_MAIN(2)\n"),
                              ("03_naive_decode", "PA_STEP_BENCHMARK_MAIN(3)\n"),
                              ("00_reference", "BENCHMARK_MAIN();\n")):
            step_dir = self.root / "steps" / folder
            step_dir.mkdir(parents=True)
            (step_dir / "README.md").write_text(STEP_PAGE.format(nn=folder[:2]), encoding="utf-8")
            (step_dir / "bench.cpp").write_text(bench, encoding="utf-8")
        no_markers = self.root / "steps" / "04_block_threads"
        no_markers.mkdir(parents=True)
        (no_markers / "README.md").write_text("# Step 04\n\nNo markers here.\n", encoding="utf-8")

    def write(self, name, data):
        path = self.results / name
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return path

    def text(self, relative):
        return (self.root / relative).read_text(encoding="utf-8")

    def run_script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), "--root", str(self.root), *args],
                              capture_output=True, text=True, check=False)

    def close(self):
        self.dir.cleanup()


def region(text):
    start = text.index(rl.BEGIN_MARKER) + len(rl.BEGIN_MARKER)
    return text[start:text.index(rl.END_MARKER)]


def table_rows(text):
    """The rows of the first Markdown table in \\p text, as lists of cells (header first)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|-"):
            continue  # the alignment row
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    return rows


# ----------------------------------------------------------------------------------------------


class ParsingTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()

    def tearDown(self):
        self.tree.close()

    def test_names_lose_google_benchmark_suffixes(self):
        self.assertEqual(rl.parse_name("step08_gqa_sharing/gpu/gqa-batch/iterations:1/manual_time"),
                         (8, "step08_gqa_sharing", "gpu", "gqa-batch"))
        self.assertEqual(rl.parse_name("step03_naive_decode/traffic/ragged-skew/iterations:1"),
                         (3, "step03_naive_decode", "traffic", "ragged-skew"))
        self.assertEqual(rl.parse_name("step02_pretend_programs/emulator/tour"),
                         (2, "step02_pretend_programs", "emulator", "tour"))
        self.assertIsNone(rl.parse_name("BM_paged_oracle/size:0/dtype:1"))
        self.assertIsNone(rl.parse_name("step03_naive_decode/cpu/gqa-batch"))

    def test_gpu_results_are_indexed_with_times_in_seconds(self):
        run = rl.Run.from_json(gpu_run(), Path("x.json"))
        self.assertTrue(run.is_gpu_run)
        self.assertEqual(run.steps("gpu"), [2, 3, 4])
        result = run.get(3, "gpu", "gqa-batch")
        self.assertAlmostEqual(result.seconds, 2.0e-3)
        self.assertEqual(result.counter("GB/s"), 500.0)
        self.assertIn((3, "step03_naive_decode", "gpu", "gqa-batch"), run.results)
        self.assertEqual(run.named_workloads(), ["gqa-batch", "long-single"])
        self.assertEqual(run.sweep(), [(512, "sweep-512"), (1024, "sweep-1024")])
        self.assertEqual(run.roof_gbps, 4570.3)

    def test_time_units_convert(self):
        bench = gpu_bench(2, "gqa-batch", 1500.0, 1.0)
        bench["time_unit"] = "us"
        run = rl.Run.from_json({"context": {}, "benchmarks": [bench]}, Path("x.json"))
        self.assertAlmostEqual(run.get(2, "gpu", "gqa-batch").seconds, 1.5e-3)

    def test_refused_entries_are_kept_with_their_message(self):
        result = rl.Run.from_json(gpu_run(), Path("x.json")).get(4, "gpu", "long-single")
        self.assertFalse(result.ok)
        self.assertTrue(result.refused)
        self.assertIsNone(result.seconds)
        self.assertIn("shared memory", result.error)

    def test_traffic_and_emulator_kinds(self):
        run = rl.Run.from_json(traffic_run(), Path("t.json"))
        self.assertFalse(run.is_gpu_run)
        self.assertEqual(run.get(3, "traffic", "gqa-batch").counter("predicted_bytes"), 1.82812e9)
        self.assertEqual(run.get(3, "emulator", "tour").counter("emu_bytes"), 2.0e6)

    def test_other_files_are_skipped(self):
        self.tree.write("run.log", "not json at all")
        self.tree.write("broken.json", "{ truncated")
        self.tree.write("notes.json", {"title": "not benchmark output"})
        self.tree.write("list.json", [1, 2, 3])
        self.tree.write("h200.json", gpu_run())
        runs = rl.load_runs(self.tree.results)
        self.assertEqual([run.path.name for run in runs], ["h200.json"])

    def test_newest_gpu_run_by_context_date_not_file_name(self):
        self.tree.write("a-newest.json", gpu_run(date="2026-12-01T08:00:00+00:00", rev="new"))
        self.tree.write("z-older.json", gpu_run(date="2026-11-02T08:00:00+00:00", rev="old"))
        self.tree.write("emulator-traffic.json", traffic_run())  # newer than nothing, but not a GPU run
        ladder = rl.load(self.tree.root)
        self.assertEqual(ladder.gpu.revision, "new")
        self.assertEqual(ladder.traffic.path.name, "emulator-traffic.json")

    def test_a_given_path_wins(self):
        self.tree.write("a-newest.json", gpu_run(date="2026-12-01T08:00:00+00:00", rev="new"))
        older = self.tree.write("z-older.json", gpu_run(date="2026-11-02T08:00:00+00:00", rev="old"))
        self.assertEqual(rl.load(self.tree.root, gpu_path=older).gpu.revision, "old")
        with self.assertRaises(ValueError):
            rl.load(self.tree.root, gpu_path=self.tree.write("t.json", traffic_run()))

    def test_no_results_at_all(self):
        ladder = rl.load(self.tree.root)
        self.assertIsNone(ladder.gpu)
        self.assertIsNone(ladder.traffic)
        self.assertEqual(ladder.steps(), [])
        self.assertEqual(ladder.stamp_line(), rl.NO_GPU_RESULTS)


class NumbersTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.tree.write("h200.json", gpu_run())
        self.tree.write("emulator-traffic.json", traffic_run())
        self.ladder = rl.load(self.tree.root)

    def tearDown(self):
        self.tree.close()

    def test_stamp_line(self):
        self.assertEqual(self.ladder.stamp_line(),
                         "NVIDIA H200 · roof 4570 GB/s (measured) · datasheet 4800 GB/s · rev abc1234 · 2026-11-30")

    def test_speedup_is_previous_time_over_this_time(self):
        self.assertEqual(self.ladder.speedup(3, "gqa-batch"), (4.0, 2))
        self.assertEqual(self.ladder.speedup(4, "gqa-batch"), (4.0, 3))
        self.assertEqual(self.ladder.speedup(2, "gqa-batch"), (None, None))  # the first rung
        self.assertEqual(self.ladder.speedup(4, "long-single"), (None, None))  # refused here

    def test_speedup_skips_a_rung_that_refused(self):
        data = {"context": gpu_context(), "benchmarks": [
            gpu_bench(2, "long-single", 4.0, 50.0), refused_bench(3, "long-single"),
            gpu_bench(4, "long-single", 0.5, 400.0)]}
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("skip.json", data))
        self.assertEqual(ladder.speedup(4, "long-single"), (8.0, 2))
        row = {r.workload: r for r in ladder.step_rows(4)}["long-single"]
        self.assertEqual(row.speedup_vs, 2)
        cells = {r[0]: r for r in table_rows(rl.step_table(ladder, 4))}
        self.assertEqual(cells["`long-single`"][-1], "8.00× (vs 02)")

    def test_floor_is_predicted_bytes_over_the_measured_roof(self):
        self.assertAlmostEqual(self.ladder.floor_seconds(3, "gqa-batch"), 1.82812e9 / 4570.3e9)
        self.assertIsNone(self.ladder.floor_seconds(2, "long-single"))  # no traffic recorded for it
        row = {r.workload: r for r in self.ladder.step_rows(3)}["gqa-batch"]
        self.assertAlmostEqual(row.time_over_floor, 2.0e-3 / (1.82812e9 / 4570.3e9))

    def test_without_bare_reads_the_tables_have_no_bare_columns(self):
        self.assertFalse(self.ladder.has_bare_reads)
        self.assertNotIn("bare read (ms)", table_rows(rl.step_table(self.ladder, 3))[0])
        self.assertNotIn("Bare read", rl.readme_region(self.ladder))

    def test_bare_reads_by_the_pattern_of_each_step(self):
        data = gpu_run()
        data["benchmarks"] += [bare_bench("gqa-batch", "once", 0.4, 5000.0),
                               bare_bench("gqa-batch", "per-query-head", 0.5, 4000.0),
                               bare_bench("long-single", "once", 0.1, 1000.0)]
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("bare.json", data))
        self.assertTrue(ladder.has_bare_reads)
        self.assertFalse(ladder.gpu.has("bare_read"))  # not a step
        self.assertEqual(rl.bare_pattern(7), "per-query-head")
        self.assertEqual(rl.bare_pattern(8), "once")
        self.assertAlmostEqual(ladder.bare_seconds(3, "gqa-batch"), 0.5e-3)  # steps 03-07: per query head
        self.assertAlmostEqual(ladder.bare_seconds(8, "gqa-batch"), 0.4e-3)
        self.assertIsNone(ladder.bare_seconds(3, "long-single"))  # that pattern was not recorded
        rows = table_rows(rl.step_table(ladder, 3))
        self.assertEqual(rows[0], ["workload", "median time (ms)", "GB/s", "% of roof", "% of datasheet",
                                   "predicted floor (ms)", "time / floor", "bare read (ms)", "time / bare read",
                                   "speed-up vs step 02"])
        cells = {r[0]: r for r in rows}
        self.assertEqual(cells["`gqa-batch`"][7:9], ["0.500", "4.00×"])  # 2.0 ms / 0.5 ms
        self.assertEqual(cells["`long-single`"][7:9], [rl.DASH, rl.DASH])
        readme = rl.readme_region(ladder)
        bare_rows = {r[0]: r for r in table_rows(readme[readme.index("Bare reads"):])}
        self.assertEqual(bare_rows["`gqa-batch`"], ["`gqa-batch`", "0.400 (104.2%)", "0.500 (83.3%)"])
        self.assertEqual(bare_rows["`long-single`"], ["`long-single`", "0.100 (20.8%)", rl.DASH])
        self.assertIn("read once per query head, as this step reads them", rl.step_region(ladder, 3))

    def test_rows_of_long_launches_take_fewer_runs_and_the_method_says_so(self):
        data = gpu_run()
        for bench in data["benchmarks"]:
            if bench["name"].startswith(KERNELS[2] + "/gpu/") and "runs" in bench:
                bench["runs"] = 5  # step 02's rows: four of them
        plain = rl.load(self.tree.root, gpu_path=self.tree.write("fewer.json", data))
        self.assertEqual(plain.runs_per_median(), 20)
        self.assertIn("median of 20 runs (5 for 4 rows), CUDA events", rl.step_region(plain, 3))
        data["context"].update({"long_launch_ms": "10", "long_launch_runs": "5"})
        keyed = rl.load(self.tree.root, gpu_path=self.tree.write("keyed.json", data))
        self.assertIn("median of 20 runs (5 where one launch takes over 10 ms), CUDA events", rl.step_region(keyed, 3))
        self.assertIsNone(self.ladder.fewer_runs())
        self.assertIn("median of 20 runs, CUDA events", rl.step_region(self.ladder, 3))

    def test_rounds_of_the_named_rows_keep_the_median_entry_and_the_method_says_so(self):
        # harness/bench.h, register_named_rounds: a row's name once a round, in turn with the other rungs.
        data = gpu_run()
        data["benchmarks"] += [gpu_bench(3, "gqa-batch", 2.6, 385.0), gpu_bench(3, "gqa-batch", 2.2, 455.0),
                               bare_bench("gqa-batch", "per-query-head", 0.45, 4400.0),
                               bare_bench("gqa-batch", "per-query-head", 0.41, 4850.0),
                               bare_bench("gqa-batch", "per-query-head", 0.43, 4650.0)]
        data["context"]["named_rounds"] = "3"
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("rounds.json", data))
        self.assertEqual(ladder.named_rounds(), 3)
        # step 03's three entries 2.0, 2.6 and 2.2 ms: the middle one, with its own counters
        result = ladder.gpu.results[(3, KERNELS[3], "gpu", "gqa-batch")]
        self.assertAlmostEqual(result.seconds, 2.2e-3)
        self.assertEqual(result.counter("GB/s"), 455.0)
        cells = {r[0]: r for r in table_rows(rl.step_region(ladder, 3))}
        self.assertEqual(cells["`gqa-batch`"][7:9], ["0.430", "5.12×"])  # bare read: 0.43 of 0.41 / 0.43 / 0.45 ms
        self.assertIn("ran in 3 rounds, every rung's row of a workload one after another in each, backwards every "
                      "other round; each of their times is the median of its 3.", rl.step_region(ladder, 3))
        self.assertEqual(self.ladder.named_rounds(), 1)  # a run from before the rounds, and the text says none
        self.assertNotIn("rounds", rl.step_region(self.ladder, 3))
        data["context"]["named_rounds"] = "x"
        self.assertEqual(rl.load(self.tree.root, gpu_path=self.tree.write("bad.json", data)).named_rounds(), 1)
        # one round whose output check failed fails the row, though the two others timed it
        data["benchmarks"].append(refused_bench(3, "gqa-batch", "output check after timing failed: seq 0 head 1"))
        failed = rl.load(self.tree.root, gpu_path=self.tree.write("failed.json", data))
        self.assertEqual(failed.gpu.results[(3, KERNELS[3], "gpu", "gqa-batch")].error,
                         "output check after timing failed: seq 0 head 1")

    def test_formats(self):
        self.assertEqual(rl.fmt_ms(2.0e-3), "2.00")
        self.assertEqual(rl.fmt_ms(4.123e-5), "0.0412")
        self.assertEqual(rl.fmt_ms(0.04567), "45.7")
        self.assertEqual(rl.fmt_ms(0.9996), "1000")
        self.assertEqual(rl.fmt_ms(0.09996), "100")
        self.assertEqual(rl.fmt_ms(None), rl.DASH)
        self.assertEqual(rl.fmt_gbps(4301.6), "4302")
        self.assertEqual(rl.fmt_pct(89.44), "89.4%")
        self.assertEqual(rl.fmt_ratio(4.0), "4.00×")
        self.assertEqual(rl.fmt_ratio(12.34), "12.3×")

    def test_step_table(self):
        rows = table_rows(rl.step_table(self.ladder, 3))
        self.assertEqual(rows[0], ["workload", "median time (ms)", "GB/s", "% of roof", "% of datasheet",
                                   "predicted floor (ms)", "time / floor", "speed-up vs step 02"])
        gqa = rows[1]
        self.assertEqual(gqa[:5], ["`gqa-batch`", "2.00", "500", "10.9%", "10.4%"])
        self.assertEqual(gqa[5], "0.400")  # 1.82812 GB / 4570.3 GB/s
        self.assertEqual(gqa[6], "5.00×")
        self.assertEqual(gqa[7], "4.00×")

    def test_refused_rows(self):
        rows = {r[0]: r for r in table_rows(rl.step_table(self.ladder, 4))}
        self.assertEqual(rows["`long-single`"][1], "refused")
        self.assertEqual(rows["`long-single`"][2:5], [rl.DASH] * 3)
        page = rl.step_region(self.ladder, 4)
        self.assertIn("- `long-single`: `refused: context 32768 needs 128 KiB of shared memory`", page)

    def test_ladder_table(self):
        rows = table_rows(rl.ladder_table(self.ladder))
        self.assertEqual(rows[0], ["#", "step", "`gqa-batch`", "`long-single`"])
        self.assertEqual(rows[1], ["02", "`step02_pretend_programs`", "125 (2.6%)", "50 (1.0%)"])
        self.assertEqual(rows[3], ["04", "`step04_block_threads`", "2000 (41.7%)", "refused"])
        self.assertEqual(len(rows), 4)

    def test_step_region_stamp_and_method(self):
        page = rl.step_region(self.ladder, 3)
        self.assertTrue(page.startswith("**NVIDIA H200 · roof 4570 GB/s (measured)"))
        self.assertIn("median of 20 runs, CUDA events, L2 flushed", page)
        self.assertIn("`docs/results/h200.json`", page)
        self.assertIn("`docs/results/emulator-traffic.json`", page)

    def test_method_names_the_flush(self):
        self.assertIn("L2 flushed by a memset;", rl.step_region(self.ladder, 3))  # files without the key
        data = gpu_run()
        data["context"]["l2_flush"] = "read"
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("read.json", data))
        self.assertIn("CUDA events, L2 flushed by reading twice its size;", rl.step_region(ladder, 3))

    def test_method_names_the_sm_clock_when_measured(self):
        self.assertNotIn("SM clock", rl.step_region(self.ladder, 3))  # files without the counter
        data = gpu_run()
        for bench in data["benchmarks"]:
            bench["sm_mhz"] = 1980.0
        steady = rl.load(self.tree.root, gpu_path=self.tree.write("steady.json", data))
        self.assertIn("The SM clock, measured after each row's runs by a one-thread kernel, was 1980 MHz throughout;",
                      rl.step_region(steady, 3))
        self.assertIn("runs below that clock while it does", rl.step_region(steady, 3))
        data["benchmarks"][2]["sm_mhz"] = 1755.0
        moved = rl.load(self.tree.root, gpu_path=self.tree.write("moved.json", data))
        self.assertIn("ranged from 1755 to 1980 MHz;", rl.step_region(moved, 3))
        self.assertEqual(moved.sm_clock_range(), (1755.0, 1980.0))

    def test_replace_regions_keeps_the_rest(self):
        text = "a\n<!-- results:begin -->\nx\n<!-- results:end -->\nb\n<!-- results:begin --><!-- results:end -->\n"
        new = rl.replace_regions(text, "NEW")
        self.assertEqual(new, "a\n<!-- results:begin -->\nNEW\n<!-- results:end -->\nb\n"
                              "<!-- results:begin -->\nNEW\n<!-- results:end -->\n")
        self.assertEqual(rl.replace_regions(new, "NEW"), new)
        with self.assertRaises(ValueError):
            rl.replace_regions("<!-- results:begin -->\n", "NEW")


def variant_bench(step, workload, variant, ms, label="", refused=False):
    name = f"{KERNELS[step]}/gpu/{workload}/variant-{variant}/iterations:1/manual_time"
    bench = {"name": name, "run_name": name, "run_type": "iteration", "iterations": 1, "real_time": ms,
             "cpu_time": 0.01, "time_unit": "ms", "GB/s": 100.0, "label": label}
    if refused:
        bench.update(error_occurred=True, error_message="refused: options.variant 4 only for bf16")
    return bench


class TargetsTest(unittest.TestCase):
    """The README's table of docs/design/BENCHMARKS.md's targets for the fastest rung."""

    def setUp(self):
        self.tree = Tree()

    def tearDown(self):
        self.tree.close()

    def ladder(self, benches):
        data = {"context": gpu_context(), "benchmarks": benches}
        return rl.load(self.tree.root, gpu_path=self.tree.write("targets.json", data))

    def test_the_targets_are_those_of_the_design_page(self):
        page = (rl.ROOT / "docs" / "design" / "BENCHMARKS.md").read_text(encoding="utf-8")
        section = page[page.index("## Named workloads"):]
        section = section[:section.index("\n## ", 1)]
        found = {}
        for line in section.splitlines():
            match = re.match(r"^\| `([a-z0-9-]+)` \|.*\| ([^|]*) \|$", line)
            if match:
                found[match.group(1)] = match.group(2)
        self.assertEqual(set(found), {t.workload for t in rl.TARGETS})
        for target in rl.TARGETS:
            cell = found[target.workload]
            if target.ratio is not None:
                self.assertIn(f"≥ {target.ratio:g}× faster than `{target.faster_than}`", cell, target.workload)
            else:
                self.assertTrue(cell.startswith(f"≥ {target.pct:g}%"), (target.workload, cell))
                if target.roof_pct is not None:
                    self.assertIn(f"≥ {target.roof_pct:g}% of the roof", cell)
                else:
                    self.assertNotIn("roof", cell)

    def test_fastest_rung_met_missed_and_the_time_asked(self):
        gqa8 = gpu_bench(8, "gqa-batch", 0.23, 4400.0)
        gqa8["pct_roof"] = 96.3
        ladder = self.ladder([gqa8, gpu_bench(9, "gqa-batch", 0.25, 4000.0),
                              gpu_bench(8, "mha-batch", 0.26, 3900.0), gpu_bench(9, "mha-batch", 0.25, 4000.0),
                              refused_bench(8, "gqa-batch-fp8"), gpu_bench(9, "gqa-batch-fp8", 0.13, 3800.0),
                              gpu_bench(9, "sweep-512", 0.01, 100.0),
                              bare_bench("mha-batch", "once", 0.21, 4700.0)])
        self.assertEqual(rl.fastest_rung(ladder, "gqa-batch").step, 8)
        self.assertEqual(rl.fastest_rung(ladder, "gqa-batch-fp8").step, 9)  # step 08 refused it
        self.assertIsNone(rl.fastest_rung(ladder, "long-single"))
        rows = table_rows(rl.targets_table(ladder))
        self.assertEqual(rows[0], ["workload", "target (fastest rung)", "fastest rung in this run", "met",
                                   "bare read, once"])
        cells = {r[0]: r for r in rows[1:]}
        self.assertEqual(list(cells), ["`gqa-batch`", "`mha-batch`", "`gqa-batch-fp8`"])  # TARGETS' order, ran only
        self.assertEqual(cells["`gqa-batch`"][1:], ["≥ 91% (≥ 96% of the roof)",
                                                    "step 08: 230 µs (91.7%; 96.3% of the roof)", "yes", rl.DASH])
        # 83.3% < 92%: the bytes (1 GB) at 92% of 4800 GB/s take 226 µs
        self.assertEqual(cells["`mha-batch`"][1:], ["≥ 92%", "step 09: 250 µs (83.3%)", "no: 226 µs or less",
                                                    "210 µs (97.9%)"])
        # 230 / 130 = 1.769× < 1.8×: it asks for 230 / 1.8 = 128 µs
        self.assertEqual(cells["`gqa-batch-fp8`"][1:], ["≥ 1.8× as fast as `gqa-batch`",
                                                        "step 09: 130 µs, 1.769× step 08's 230 µs",
                                                        "no: 128 µs or less", rl.DASH])
        self.assertIn("The targets of docs/design/BENCHMARKS.md", rl.readme_region(ladder))

    def test_both_shares_of_gqa_batch_must_hold(self):
        low_roof = gpu_bench(8, "gqa-batch", 0.22, 4420.0, roof=4700.0)  # 92.1% of the datasheet, 94.0% of the roof
        rows = table_rows(rl.targets_table(self.ladder([low_roof])))
        # 1 GB at 96% of the run's roof (4570.3 GB/s) asks for 228 µs; at 91% of 4800 GB/s, 229
        self.assertEqual(rows[1][3], "no: 228 µs or less")

    def test_without_a_gpu_run_or_a_target_workload_there_is_no_table(self):
        self.assertIsNone(rl.targets_table(self.ladder([gpu_bench(9, "sweep-512", 0.01, 100.0)])))
        self.tree.write("emulator-traffic.json", traffic_run())
        no_gpu = rl.load(self.tree.root, gpu_path=None)
        no_gpu.gpu = None
        self.assertIsNone(rl.targets_table(no_gpu))


class AblationTest(unittest.TestCase):
    """A step's variants (`.../<workload>/variant-V`) are kept apart from its own results and
    tabulated against it; a baseline.json in the run's folder is compared workload by workload."""

    def setUp(self):
        self.tree = Tree()
        data = gpu_run()
        data["benchmarks"] += [
            variant_bench(4, "gqa-batch", 1, 0.55, "grid 8 x 1 x 16 programs; variant 1: no block-table prefetch"),
            variant_bench(4, "gqa-batch", 2, 0.0, "x; variant 2: copies one tile ahead", refused=True),
        ]
        self.path = self.tree.write("h200.json", data)
        self.tree.write("emulator-traffic.json", traffic_run())

    def tearDown(self):
        self.tree.close()

    def test_variants_do_not_replace_the_steps_own_results(self):
        self.assertEqual(rl.parse_name("step04_x/gpu/gqa-batch/variant-1/iterations:1/manual_time"), None)
        self.assertEqual(rl.parse_variant_name("step04_x/gpu/gqa-batch/variant-1/iterations:1/manual_time"),
                         (4, "gqa-batch", 1))
        ladder = rl.load(self.tree.root)
        self.assertAlmostEqual(ladder.gpu_result(4, "gqa-batch").seconds, 0.5e-3)
        self.assertAlmostEqual(ladder.gpu.variants[(4, "gqa-batch", 1)].seconds, 0.55e-3)
        self.assertEqual(ladder.gpu.variant_labels[(4, 1)], "no block-table prefetch")

    def test_ablation_table_rows_and_changes(self):
        ladder = rl.load(self.tree.root)
        text = rl.ablation_region(ladder, 4)
        self.assertIn("| 1: no block-table prefetch | 0.550 (+10.0%) |", text)
        self.assertIn("| 2: copies one tile ahead | refused |", text)
        self.assertIn("| all of them: `step03_naive_decode` | 2.00 (+300.0%) |", text)
        self.assertIn("No ablation results for step 03", rl.ablation_region(ladder, 3))

    def test_baseline_in_the_runs_folder_is_compared(self):
        base = {"context": gpu_context(rev="old0001"), "benchmarks": [gpu_bench(3, "gqa-batch", 0.4, 2500.0)]}
        folder = self.path.with_suffix("")
        folder.mkdir()
        (folder / "baseline.json").write_text(json.dumps(base), encoding="utf-8")
        ladder = rl.load(self.tree.root)
        text = rl.baseline_region(ladder, 4)  # step 04 against the baseline's highest rung up to 04: 03
        self.assertIn("| `gqa-batch` | 0.500 | 0.400 | 1.250 |", text)
        self.assertIn("at revision old0001", text)
        self.assertIn("`step03_naive_decode` as it was", text)
        self.assertIn("No baseline recorded", rl.baseline_region(ladder, 2))

    def test_archived_baseline_where_the_newest_run_has_none(self):
        base = {"context": gpu_context(rev="old0001"), "benchmarks": [gpu_bench(3, "gqa-batch", 0.4, 2500.0)]}
        then = {"context": gpu_context(rev="arc0001"), "benchmarks": [gpu_bench(4, "gqa-batch", 0.8, 2500.0)]}
        archive = self.tree.root / rl.ARCHIVE_DIR
        (archive / "nvidia-h200-20261101-arc0001").mkdir(parents=True)
        (archive / "nvidia-h200-20261101-arc0001.json").write_text(json.dumps(then), encoding="utf-8")
        (archive / "nvidia-h200-20261101-arc0001" / "baseline.json").write_text(json.dumps(base), encoding="utf-8")
        ladder = rl.load(self.tree.root)
        text = rl.baseline_region(ladder, 4)  # the archived run's step 04 against its baseline's step 03
        self.assertIn("| `gqa-batch` | 0.800 | 0.400 | 2.000 |", text)
        self.assertIn("newest archived run with a baseline", text)
        self.assertIn("lab/runs/nvidia-h200-20261101-arc0001.json", text)


def sweep_run():
    """Steps 07-09 on gqa-batch (1.0, 0.6 and 0.5 ms) and a few points of the shape sweeps for 08
    and 09 (step 07 records none): group-1, group-7 (refused by step 08), head-dim-256, and
    group-64, a point docs/design/BENCHMARKS.md does not name."""
    benches = [gpu_bench(7, "gqa-batch", 1.0, 2000.0), gpu_bench(8, "gqa-batch", 0.6, 3600.0),
               gpu_bench(9, "gqa-batch", 0.5, 4320.0),
               gpu_bench(8, "group-1", 0.7, 3120.0), refused_bench(8, "group-7", "refused: no kernel for group 7"),
               gpu_bench(8, "head-dim-256", 1.5, 2880.0),
               gpu_bench(9, "group-1", 0.55, 3960.0), gpu_bench(9, "group-7", 0.52, 4176.0),
               gpu_bench(9, "head-dim-256", 1.0, 4320.0), gpu_bench(9, "group-64", 0.8, 2400.0),
               gpu_bench(9, "single-1024", 0.01, 480.0), gpu_bench(9, "single-1048576", 1.0, 4320.0)]
    return {"context": gpu_context(), "benchmarks": benches}


SWEEPS_PAGE = "# Step {nn}\n\n<!-- sweeps:begin -->\n(placeholder)\n<!-- sweeps:end -->\n\nAfter.\n"


def sweeps_of(text):
    start = text.index(rl.SWEEPS_BEGIN) + len(rl.SWEEPS_BEGIN)
    return text[start:text.index(rl.SWEEPS_END)]


class ShapeSweepTest(unittest.TestCase):
    """The shape sweeps (`stepNN_x/gpu/group-<g>`, `.../head-dim-<d>`): one table each between the
    sweeps markers, every rung from 08 on; g = 4 and d = 128 are read from the gqa-batch row."""

    def setUp(self):
        self.tree = Tree()
        self.path = self.tree.write("h200.json", sweep_run())
        self.ladder = rl.load(self.tree.root)

    def tearDown(self):
        self.tree.close()

    def test_sweep_points_are_not_named_workloads(self):
        self.assertEqual(self.ladder.named_workloads(), ["gqa-batch"])
        self.assertEqual(table_rows(rl.ladder_table(self.ladder))[0], ["#", "step", "`gqa-batch`"])
        self.assertEqual([row.workload for row in self.ladder.step_rows(9)], ["gqa-batch"])
        self.assertEqual(self.ladder.gpu.sweep(), [])  # nor points of the context sweep
        self.assertTrue(self.ladder.has_shape_sweeps())

    def test_group_table(self):
        rows = table_rows(rl.shape_sweep_table(self.ladder, rl.GROUP_SWEEP))
        self.assertEqual(rows[0], ["#", "step", "g = 1", "2", "3", "4", "5", "6", "7", "8", "12", "16", "32", "64"])
        self.assertEqual([row[0] for row in rows[1:]], ["08", "09"])  # step 07 has no row
        step08, step09 = rows[1], rows[2]
        self.assertEqual(step08[1], "`step08_gqa_sharing`")
        self.assertEqual(step08[2], "65.0% (700)")  # 3120 / 4800 GB/s, 0.7 ms
        self.assertEqual(step08[3], rl.DASH)       # not recorded
        self.assertEqual(step08[5], "75.0% (600)")  # g = 4: gqa-batch's row
        self.assertEqual(step08[8], "refused")
        self.assertEqual(step08[-1], rl.DASH)
        self.assertEqual(step09[8], "87.0% (520)")
        self.assertEqual(step09[-1], "50.0% (800)")  # a point beyond BENCHMARKS.md's gets a column

    def test_head_dim_table(self):
        rows = table_rows(rl.shape_sweep_table(self.ladder, rl.HEAD_DIM_SWEEP))
        self.assertEqual(rows[0], ["#", "step", "d = 64", "80", "96", "112", "128", "256"])
        self.assertEqual(rows[1][2:], [rl.DASH] * 4 + ["75.0% (600)", "60.0% (1500)"])
        self.assertEqual(rows[2][2:], [rl.DASH] * 4 + ["90.0% (500)", "90.0% (1000)"])

    def test_single_sequence_table(self):
        rows = table_rows(rl.shape_sweep_table(self.ladder, rl.SINGLE_SWEEP))
        self.assertEqual(rows[0], ["#", "step", "n = 1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k",
                                   "512k", "1M"])
        self.assertEqual(rows[1][2:], [rl.DASH] * 11)  # step 08 recorded none; no gqa-batch point here
        self.assertEqual(rows[2][2], "10.0% (10.0)")
        self.assertEqual(rows[2][-1], "90.0% (1000)")
        self.assertEqual(self.ladder.shape_series(9, rl.SINGLE_SWEEP), [(1024, 10.0), (1048576, 90.0)])

    def test_series_for_the_plots(self):
        self.assertEqual(self.ladder.shape_series(8, rl.GROUP_SWEEP), [(1, 65.0), (4, 75.0)])
        self.assertEqual(self.ladder.shape_series(9, rl.HEAD_DIM_SWEEP), [(128, 90.0), (256, 90.0)])
        self.assertEqual(self.ladder.shape_sweep_steps(), [8, 9])
        self.assertAlmostEqual(self.ladder.roof_pct_datasheet, 100 * 4570.3 / 4800.0)

    def test_region(self):
        text = rl.sweeps_region(self.ladder)
        self.assertTrue(text.startswith("**NVIDIA H200 · roof 4570 GB/s (measured)"))
        self.assertIn("Group size g (8·g query heads over 8 KV heads, head dim 128;", text)
        self.assertIn("Head dim d (32 query heads over 8 KV heads;", text)
        self.assertIn("| 09 | `step09_memory_pipeline` | 82.5% (550) |", text)
        self.assertIn("The target is ≥ 85% at every point", text)
        self.assertIn("the roof measured in the same run is 95.2%", text)
        self.assertIn("g = 4 and d = 128 are `gqa-batch` itself", text)
        self.assertIn("Context length n (32 query heads over 8 KV heads, head dim 128; one sequence of n tokens):", text)
        self.assertIn("the context sweep of one sequence has none", text)
        self.assertIn("`docs/results/h200.json`", text)

    def test_without_sweep_rows_the_region_says_so(self):
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("plain.json", gpu_run()))
        self.assertFalse(ladder.has_shape_sweeps())
        text = rl.sweeps_region(ladder)
        self.assertIn("No shape-sweep rows (`group-<g>`, `head-dim-<d>`, `single-<n>`) in `docs/results/plain.json`", text)
        self.assertIn("not recorded yet", text)
        self.assertNotIn("|", text)
        self.path.unlink()
        (self.tree.results / "plain.json").unlink()
        self.assertEqual(rl.sweeps_region(rl.load(self.tree.root)), rl.NO_GPU_RESULTS)

    def test_script_fills_every_page_with_markers(self):
        page = self.tree.root / "steps" / "08_gqa_sharing"
        page.mkdir(parents=True)
        (page / "README.md").write_text(SWEEPS_PAGE.format(nn="08"), encoding="utf-8")
        readme = self.tree.root / "README.md"
        readme.write_text(README + "\n<!-- sweeps:begin -->\n<!-- sweeps:end -->\n", encoding="utf-8")
        self.assertEqual(self.tree.run_script().returncode, 0)
        for text in (self.tree.text("steps/08_gqa_sharing/README.md"), self.tree.text("README.md")):
            self.assertIn("| 08 | `step08_gqa_sharing` | 65.0% (700) |", sweeps_of(text))
        self.assertTrue(self.tree.text("steps/08_gqa_sharing/README.md").endswith("<!-- sweeps:end -->\n\nAfter.\n"))
        self.assertIn("| 09 | `step09_memory_pipeline` |", region(self.tree.text("README.md")))  # the results region too
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 0, check.stderr)
        # A newer run without sweep rows: the regions say so.
        self.tree.write("newer.json", gpu_run(date="2026-12-02T10:00:00+00:00"))
        self.assertEqual(self.tree.run_script("--check").returncode, 1)
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertIn("not recorded yet", sweeps_of(self.tree.text("steps/08_gqa_sharing/README.md")))


class ScriptTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()

    def tearDown(self):
        self.tree.close()

    def test_without_gpu_results_the_regions_say_so_and_check_passes(self):
        self.assertEqual(self.tree.run_script("--check").returncode, 1)  # placeholders are stale
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertIn(rl.NO_GPU_RESULTS, region(self.tree.text("README.md")))
        self.assertIn(rl.NO_GPU_RESULTS, region(self.tree.text("steps/03_naive_decode/README.md")))
        self.assertIn("not on the GPU ladder", region(self.tree.text("steps/00_reference/README.md")))
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 0, check.stderr)

    def test_check_rewrite_check_and_idempotence(self):
        self.tree.write("nvidia-h200-20261130-abc1234.json", gpu_run())
        self.tree.write("emulator-traffic.json", traffic_run())
        self.tree.write("bench.log", "a log file")
        before = {p: self.tree.text(p) for p in ("README.md", "steps/04_block_threads/README.md")}

        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 1)
        self.assertIn("README.md is out of date", check.stderr)
        self.assertIn("steps/03_naive_decode/README.md is out of date", check.stderr)
        self.assertEqual(self.tree.text("README.md"), before["README.md"])  # --check changes nothing

        run = self.tree.run_script()
        self.assertEqual(run.returncode, 0, run.stderr)
        readme = self.tree.text("README.md")
        self.assertTrue(readme.startswith("# pagedattn\n\nBefore.\n"))
        self.assertTrue(readme.endswith("<!-- results:end -->\n\nAfter.\n"))
        self.assertIn("| 04 | `step04_block_threads` | 2000 (41.7%) | refused |", readme)
        self.assertEqual(self.tree.text("steps/04_block_threads/README.md"),
                         before["steps/04_block_threads/README.md"])  # no markers: untouched
        self.assertIn("| `gqa-batch` | 2.00 | 500 |", self.tree.text("steps/03_naive_decode/README.md"))

        snapshot = {p: self.tree.text(p) for p in ("README.md", "steps/02_pretend_programs/README.md",
                                                  "steps/03_naive_decode/README.md")}
        self.assertEqual(self.tree.run_script("--check").returncode, 0)
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertEqual({p: self.tree.text(p) for p in snapshot}, snapshot)  # idempotent

        # A newer run makes the regions stale again.
        self.tree.write("nvidia-h200-20261201-def5678.json",
                        gpu_run(date="2026-12-01T10:00:00+00:00", rev="def5678", slow=0.5))
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 1)
        self.assertIn("steps/02_pretend_programs/README.md is out of date", check.stderr)
        self.tree.run_script()
        self.assertIn("rev def5678", self.tree.text("README.md"))

    def test_explicit_run_and_bad_file(self):
        older = self.tree.write("old.json", gpu_run(date="2026-01-01T00:00:00+00:00", rev="old1"))
        self.tree.write("new.json", gpu_run(date="2026-06-01T00:00:00+00:00", rev="new1"))
        self.assertEqual(self.tree.run_script(str(older)).returncode, 0)
        self.assertIn("rev old1", self.tree.text("README.md"))
        self.assertEqual(self.tree.run_script("--check").returncode, 1)  # the newest is new1
        bad = self.tree.run_script(str(self.tree.write("x.json", {"not": "benchmark"})))
        self.assertEqual(bad.returncode, 2)

    def test_unbalanced_markers_are_an_error(self):
        (self.tree.root / "README.md").write_text("<!-- results:begin -->\nno end\n", encoding="utf-8")
        result = self.tree.run_script("--check")
        self.assertEqual(result.returncode, 2)
        self.assertIn("unbalanced", result.stderr)


class ArchiveTest(unittest.TestCase):
    """scripts/results --archive: docs/results/ keeps the newest run of each GPU; the rest go to lab/runs/."""

    OLD = "nvidia-h200-20261130-abc1234"
    NEW = "nvidia-h200-20261201-def5678"

    def setUp(self):
        self.tree = Tree()
        self.tree.write("emulator-traffic.json", traffic_run())
        self.tree.write(self.OLD + ".json", gpu_run(date="2026-11-30T10:00:00+00:00", rev="abc1234"))
        logs = self.tree.results / self.OLD
        logs.mkdir()
        (logs / "gpu-tests.log").write_text("old tests\n", encoding="utf-8")
        self.lab = self.tree.root / "lab"
        self.lab.mkdir()
        (self.lab / "perf-log.md").write_text(
            f"- v1 `docs/results/{self.OLD}.json` (logs in `docs/results/{self.OLD}/`)\n"
            f"- v2 `docs/results/{self.NEW}.json`\n", encoding="utf-8")

    def tearDown(self):
        self.tree.close()

    def land_new_run(self):
        self.tree.write(self.NEW + ".json", gpu_run(date="2026-12-01T10:00:00+00:00", rev="def5678", slow=0.5))
        (self.tree.results / self.NEW).mkdir()
        (self.tree.results / self.NEW / "gpu-tests.log").write_text("new tests\n", encoding="utf-8")

    def names(self, folder):
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def test_superseded_runs_are_per_gpu(self):
        self.land_new_run()
        other = gpu_run(date="2026-11-01T10:00:00+00:00", rev="aaa0000")  # older, but another GPU's only run
        other["context"]["gpu"] = "NVIDIA H100"
        self.tree.write("nvidia-h100-20261101-aaa0000.json", other)
        old = rl.superseded_runs(rl.load_runs(self.tree.results))
        self.assertEqual([run.path.name for run in old], [self.OLD + ".json"])

    def test_one_run_a_gpu_moves_nothing(self):
        result = self.tree.run_script("--archive")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("moved", result.stdout)
        self.assertIn(self.OLD + ".json", self.names(self.tree.results))
        self.assertFalse((self.lab / "runs").exists())

    def test_the_replaced_run_and_its_logs_move_to_the_lab(self):
        self.land_new_run()
        result = self.tree.run_script("--archive")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"moved docs/results/{self.OLD}.json to lab/runs/{self.OLD}.json", result.stdout)
        self.assertEqual(self.names(self.tree.results), ["emulator-traffic.json", self.NEW, self.NEW + ".json"])
        self.assertEqual(self.names(self.lab / "runs"), [self.OLD, self.OLD + ".json"])
        self.assertEqual((self.lab / "runs" / self.OLD / "gpu-tests.log").read_text(encoding="utf-8"), "old tests\n")
        self.assertEqual(self.tree.text("lab/perf-log.md"),
                         f"- v1 `lab/runs/{self.OLD}.json` (logs in `lab/runs/{self.OLD}/`)\n"
                         f"- v2 `docs/results/{self.NEW}.json`\n")
        self.assertIn("rev def5678", self.tree.text("README.md"))  # then the regions, as without --archive
        self.assertEqual(self.tree.run_script("--check").returncode, 0)
        again = self.tree.run_script("--archive")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertNotIn("moved", again.stdout)

    def test_never_over_an_archived_file(self):
        self.land_new_run()
        (self.lab / "runs").mkdir()
        (self.lab / "runs" / (self.OLD + ".json")).write_text("already here", encoding="utf-8")
        result = self.tree.run_script("--archive")
        self.assertEqual(result.returncode, 2)
        self.assertIn("exists already", result.stderr)
        self.assertIn(self.OLD + ".json", self.names(self.tree.results))  # nothing moved
        self.assertIn(self.OLD, self.names(self.tree.results))

    def test_not_with_check(self):
        self.assertEqual(self.tree.run_script("--archive", "--check").returncode, 2)

    @unittest.skipUnless(shutil.which("git"), "git not installed")
    def test_git_records_the_moves_as_renames(self):
        self.land_new_run()
        git = ["git", "-C", str(self.tree.root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
        for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "runs"]):
            subprocess.run(git + command, check=True, capture_output=True)
        self.assertEqual(self.tree.run_script("--archive").returncode, 0)
        status = subprocess.run(git + ["status", "--porcelain"], check=True, capture_output=True, text=True).stdout
        self.assertIn(f"R  docs/results/{self.OLD}.json -> lab/runs/{self.OLD}.json", status)
        self.assertIn(f"R  docs/results/{self.OLD}/gpu-tests.log -> lab/runs/{self.OLD}/gpu-tests.log", status)


class PastedRegionsTest(unittest.TestCase):
    """The pasted regions (results_lib.PASTED_FILES): each file pasted between its markers, or,
    when it is missing, a line that names it and the command that writes it."""

    def setUp(self):
        self.tree = Tree()
        self.page = self.tree.root / "steps" / "03_naive_decode" / "README.md"
        markers = "".join(f"\n{pasted.begin}\nold\n{pasted.end}\n" for pasted in rl.PASTED_FILES)
        self.page.write_text(self.page.read_text(encoding="utf-8") + markers, encoding="utf-8")

    def tearDown(self):
        self.tree.close()

    def test_each_file_is_pasted(self):
        for pasted in rl.PASTED_FILES:
            self.tree.write(pasted.path.name, f"| {pasted.name} | 0 |\n|---|:-:|\n| **0** | L0 |\n")
        self.assertEqual(self.tree.run_script().returncode, 0)
        page = self.tree.text("steps/03_naive_decode/README.md")
        for pasted in rl.PASTED_FILES:
            self.assertIn(f"{pasted.begin}\n| {pasted.name} | 0 |", page)
        self.assertNotIn("\nold\n", page)

    def test_a_missing_file_is_named(self):
        self.assertEqual(self.tree.run_script().returncode, 0)
        page = self.tree.text("steps/03_naive_decode/README.md")
        self.assertIn("`docs/results/mma-fragments.md` is missing", page)
        self.assertIn("`docs/results/ragged-skew-schedule.md` is missing: write it with "
                      "`step11_persistent --schedule ragged-skew > docs/results/ragged-skew-schedule.md`", page)


def checked_bench(step, workload, ms, refused=False):
    name = f"{KERNELS[step]}/gpu/{workload}/checked/iterations:1/manual_time"
    bench = {"name": name, "run_name": name, "run_type": "iteration", "iterations": 1, "real_time": ms,
             "cpu_time": 0.01, "time_unit": "ms", "GB/s": 100.0, "runs": 20}
    if refused:
        bench.update(error_occurred=True, error_message="refused: context 32768 needs 128 KiB of shared memory")
    return bench


def checked_of(text):
    start = text.index(rl.CHECKED_BEGIN) + len(rl.CHECKED_BEGIN)
    return text[start:text.index(rl.CHECKED_END)]


CORRECTNESS_PAGE = "# Correctness\n\nBefore.\n\n<!-- checked:begin -->\nold\n<!-- checked:end -->\n\nAfter.\n"
# A design page that names the other markers in its text: they are not regions there.
BENCHMARKS_PAGE = "# Benchmarks\n\nThe sweeps go between `<!-- sweeps:begin -->` and `<!-- sweeps:end -->`.\n"


class CheckedCostTest(unittest.TestCase):
    """What checked mode costs (`stepNN_x/gpu/<workload>/checked` against `stepNN_x/gpu/<workload>`):
    one table between the checked markers, on a design page too."""

    def setUp(self):
        self.tree = Tree()
        data = gpu_run()  # off: step 02 8.0 and 4.0 ms, 03 2.0 and 1.0, 04 0.5 and refused
        data["benchmarks"] += [checked_bench(2, "gqa-batch", 8.8), checked_bench(3, "gqa-batch", 2.5),
                               checked_bench(3, "long-single", 0.99), checked_bench(4, "gqa-batch", 0.52),
                               checked_bench(4, "long-single", 0.0, refused=True)]
        self.path = self.tree.write("h200.json", data)
        self.ladder = rl.load(self.tree.root)

    def tearDown(self):
        self.tree.close()

    def test_checked_rows_are_kept_apart_from_the_steps_own(self):
        name = "step03_naive_decode/gpu/gqa-batch/checked/iterations:1/manual_time"
        self.assertEqual(rl.parse_checked_name(name), (3, "gqa-batch"))
        self.assertIsNone(rl.parse_name(name))
        self.assertIsNone(rl.parse_variant_name(name))
        self.assertIsNone(rl.parse_checked_name("step03_naive_decode/gpu/gqa-batch/iterations:1/manual_time"))
        self.assertAlmostEqual(self.ladder.gpu_result(3, "gqa-batch").seconds, 2.0e-3)
        self.assertAlmostEqual(self.ladder.gpu.checked[(3, "gqa-batch")].seconds, 2.5e-3)
        self.assertTrue(self.ladder.gpu.checked[(4, "long-single")].refused)

    def test_table_off_on_and_the_difference(self):
        rows = table_rows(rl.checked_cost_table(self.ladder))
        self.assertEqual(rows[0], ["#", "step", "`gqa-batch`", "`long-single`"])
        self.assertEqual(rows[1], ["02", "`step02_pretend_programs`", "8000 → 8800 (+800, +10.0%)", rl.DASH])
        self.assertEqual(rows[2], ["03", "`step03_naive_decode`", "2000 → 2500 (+500, +25.0%)",
                                   "1000 → 990 (-10.0, -1.0%)"])
        self.assertEqual(rows[3], ["04", "`step04_block_threads`", "500 → 520 (+20.0, +4.0%)", "refused"])

    def test_region(self):
        text = rl.checked_region(self.ladder)
        self.assertTrue(text.startswith("**NVIDIA H200 · roof 4570 GB/s (measured)"))
        self.assertIn("Each cell: the median time of one launch with checked mode off → on, in µs", text)
        self.assertIn("median of 20 runs", text)
        self.assertIn("From `docs/results/h200.json`", text)

    def test_without_checked_rows_or_a_gpu_run_the_region_says_so(self):
        ladder = rl.load(self.tree.root, gpu_path=self.tree.write("plain.json", gpu_run()))
        self.assertIsNone(rl.checked_cost_table(ladder))
        self.assertIn("No `/checked` rows in `docs/results/plain.json`", rl.checked_region(ladder))
        self.path.unlink()
        (self.tree.results / "plain.json").unlink()
        self.assertEqual(rl.checked_region(rl.load(self.tree.root)), rl.NO_GPU_RESULTS)

    def test_script_fills_the_design_page_and_leaves_markers_named_in_text(self):
        design = self.tree.root / "docs" / "design"
        design.mkdir(parents=True)
        (design / "CORRECTNESS.md").write_text(CORRECTNESS_PAGE, encoding="utf-8")
        (design / "BENCHMARKS.md").write_text(BENCHMARKS_PAGE, encoding="utf-8")
        self.assertEqual(self.tree.run_script().returncode, 0)
        page = self.tree.text("docs/design/CORRECTNESS.md")
        self.assertIn("| 03 | `step03_naive_decode` | 2000 → 2500 (+500, +25.0%) |", checked_of(page))
        self.assertTrue(page.startswith("# Correctness\n\nBefore.\n\n<!-- checked:begin -->\n**NVIDIA H200"))
        self.assertTrue(page.endswith("<!-- checked:end -->\n\nAfter.\n"))
        self.assertEqual(self.tree.text("docs/design/BENCHMARKS.md"), BENCHMARKS_PAGE)
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 0, check.stderr)


def entry_bench(mode, us, workload="small-batch", step=10, error=None):
    """An `entry_point/gpu/<workload>/host/<mode>` row as bench_ladder writes it (steps/bench_entry_point.cpp)."""
    name = f"entry_point/gpu/{workload}/host/{mode}/iterations:1/manual_time"
    bench = {"name": name, "run_name": name, "run_type": "iteration", "family_index": 0,
             "per_family_instance_index": 0, "repetitions": 1, "repetition_index": 0, "threads": 1,
             "iterations": 1, "real_time": us, "cpu_time": 3000.0, "time_unit": "us", "host_us": us,
             "rounds": 41, "calls_per_round": 64, "max_abs_error": 1e-3,
             "label": f"step {step} (step{step:02d}_tensor_cores)" if step else "two launches of an empty kernel"}
    if error:
        bench.update(error_occurred=True, error_message=error, real_time=0.0, host_us=0.0)
    return bench


class EntryPointTest(unittest.TestCase):
    """The host cost of a call of the entry point (`entry_point/gpu/<workload>/host/<mode>`): kept
    apart from the ladder's rows, which the tables read, so a run with them writes the same pages."""

    def setUp(self):
        self.tree = Tree()
        self.entries = [entry_bench("launch", 3.4167), entry_bench("decode", 4.0), entry_bench("decode-checked", 12.345)]

    def tearDown(self):
        self.tree.close()

    def test_names(self):
        name = "entry_point/gpu/small-batch/host/decode-checked/iterations:1/manual_time"
        self.assertEqual(rl.parse_entry_point_name(name), ("small-batch", "decode-checked"))
        self.assertEqual(rl.parse_entry_point_name("entry_point/gpu/small-batch/host/launch"), ("small-batch", "launch"))
        for parse in (rl.parse_name, rl.parse_variant_name, rl.parse_checked_name, rl.parse_bare_name):
            self.assertIsNone(parse(name), parse.__name__)
        self.assertEqual(rl.parse_entry_point_name("entry_point/gpu/small-batch/host/empty-kernels"),
                         ("small-batch", "empty-kernels"))
        self.assertIsNone(rl.parse_entry_point_name("entry_point/gpu/small-batch/host/checked"))
        self.assertIsNone(rl.parse_entry_point_name("entry_point/gpu/small-batch/decode"))
        self.assertIsNone(rl.parse_entry_point_name("step10_tensor_cores/gpu/small-batch/checked"))

    def test_rows_are_indexed_by_workload_and_mode(self):
        data = gpu_run()
        data["benchmarks"] += self.entries + [entry_bench("decode", 0.0, workload="gqa-batch", error="refused: no")]
        run = rl.Run.from_json(data, Path("x.json"))
        self.assertEqual(sorted(run.entry_point), [("gqa-batch", "decode"), ("small-batch", "decode"),
                                                   ("small-batch", "decode-checked"), ("small-batch", "launch")])
        checked = run.entry_point[("small-batch", "decode-checked")]
        self.assertAlmostEqual(checked.seconds, 12.345e-6)
        self.assertEqual(checked.counter("host_us"), 12.345)
        self.assertEqual(checked.step, 10)  # from the label
        self.assertTrue(run.entry_point[("gqa-batch", "decode")].refused)
        # The ladder's own rows are untouched: no step, workload or kind comes from them.
        plain = rl.Run.from_json(gpu_run(), Path("y.json"))
        self.assertEqual(run.results, plain.results)
        self.assertEqual((run.bare, run.variants, run.checked), ({}, {}, {}))
        self.assertEqual(rl.rung_of_label("no rung"), 0)
        floor = rl.Run.from_json({**data, "benchmarks": data["benchmarks"] + [entry_bench("empty-kernels", 2.0, step=None)]},
                                 Path("z.json")).entry_point[("small-batch", "empty-kernels")]
        self.assertEqual((floor.step, floor.seconds), (0, 2.0e-6))  # no rung ran it

    def test_the_script_writes_the_same_pages_with_them(self):
        data = gpu_run()
        data["benchmarks"] += self.entries
        path = self.tree.write("h200.json", data)
        result = self.tree.run_script()
        self.assertEqual(result.returncode, 0, result.stderr)
        with_rows = self.tree.text("README.md"), self.tree.text("steps/03_naive_decode/README.md")
        path.write_text(json.dumps(gpu_run()), encoding="utf-8")
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 0, check.stderr)
        self.assertEqual((self.tree.text("README.md"), self.tree.text("steps/03_naive_decode/README.md")), with_rows)

    def test_host_microseconds(self):
        self.assertEqual(rl.fmt_host_us(3.4167e-6), "3.42")
        self.assertEqual(rl.fmt_host_us(0.804e-6), "0.80")
        self.assertEqual(rl.fmt_host_us(9.996e-6), "10.0")
        self.assertEqual(rl.fmt_host_us(12.345e-6), "12.3")


class ValuesTest(unittest.TestCase):
    """Numbers in prose, `<!-- value:EXPR -->TEXT<!-- /value -->`: scripts/results writes TEXT from
    the GPU run, --check finds a stale one, and one that cannot be written is an error that names
    the page (exit 2)."""

    def setUp(self):
        self.tree = Tree()
        run = sweep_run()
        run["benchmarks"][0]["sm_mhz"] = 1838.0  # step 07 on gqa-batch
        run["benchmarks"].append(bare_bench("gqa-batch", rl.bare_pattern(9), 0.45, 4800.0))
        run["benchmarks"] += [entry_bench("launch", 3.4167), entry_bench("decode", 4.0),
                              entry_bench("decode-checked", 12.345), entry_bench("empty-kernels", 2.05, step=None),
                              entry_bench("decode", 0.0, workload="gqa-batch", error="refused: no rung runs it")]
        self.tree.write("nvidia-h200-20261130-abc1234.json", run)
        (self.tree.root / "docs" / "pages").mkdir(parents=True)

    def tearDown(self):
        self.tree.close()

    def page(self, body):
        (self.tree.root / "docs" / "pages" / "p.md").write_text("# P\n\n" + body, encoding="utf-8")

    def test_each_form(self):
        forms = {"us 09 gqa-batch": "500.0", "us 09 single-1024": "10.0", "us 08 head-dim-256": "1500.0",
                 "pct 09 gqa-batch": "90.0%", "bare-us 09 gqa-batch": "450.0", "bare-pct 09 gqa-batch": "100.0%",
                 "clock 07 gqa-batch": "1838", "ratio 09 gqa-batch 07 gqa-batch": "2.00×",
                 "slower 07 gqa-batch 09 gqa-batch": "100.0%", "slower 09 gqa-batch 09 gqa-batch": "0.0%",
                 "least 09 group-": "50.0% (g = 64)", "least 08 group-": "65.0% (g = 1)",
                 "host-us launch small-batch": "3.42", "host-us decode small-batch": "4.00",
                 "host-us decode-checked small-batch": "12.3", "host-us empty-kernels small-batch": "2.05",
                 "run rev": "abc1234", "run day": "2026-11-30", "run roof": "4570",
                 "run file": "docs/results/nvidia-h200-20261130-abc1234.json",
                 "run logs": "docs/results/nvidia-h200-20261130-abc1234/"}
        self.page("".join(f"{expr}: <!-- value:{expr} -->old<!-- /value --> after\n" for expr in forms))
        self.assertEqual(self.tree.run_script("--check").returncode, 1)
        result = self.tree.run_script()
        self.assertEqual(result.returncode, 0, result.stderr)
        text = self.tree.text("docs/pages/p.md")
        for expr, want in forms.items():
            self.assertIn(f"\n{expr}: <!-- value:{expr} -->{want}<!-- /value --> after\n", text)
        self.assertEqual(self.tree.run_script("--check").returncode, 0)
        self.tree.run_script()
        self.assertEqual(self.tree.text("docs/pages/p.md"), text)  # idempotent

    def test_a_stale_value_is_out_of_date(self):
        self.page("Step 09 took <!-- value:us 09 gqa-batch -->500.0<!-- /value --> µs.\n")
        self.assertEqual(self.tree.run_script().returncode, 0)  # the tree's other regions
        self.assertEqual(self.tree.run_script("--check").returncode, 0)
        self.page("Step 09 took <!-- value:us 09 gqa-batch -->499.9<!-- /value --> µs.\n")
        check = self.tree.run_script("--check")
        self.assertEqual(check.returncode, 1)
        self.assertIn("docs/pages/p.md is out of date", check.stderr)

    def test_what_cannot_be_written_names_the_page(self):
        cases = {
            "<!-- value:slower 09 gqa-batch 07 gqa-batch -->x<!-- /value -->":
                "step 09 on gqa-batch is 50.0% faster, not slower; rewrite the sentence around it",
            "<!-- value:us 09 mha-batch -->x<!-- /value -->": "has no row for step 09 on mha-batch",
            "<!-- value:us 08 group-7 -->x<!-- /value -->": "a row that did not run (refused: no kernel for group 7)",
            "<!-- value:bare-us 09 long-single -->x<!-- /value -->": "no bare read of long-single",
            "<!-- value:us 9 -->x<!-- /value -->": "expected us STEP WORKLOAD, got 1 word(s)",
            "<!-- value:ms 09 gqa-batch -->x<!-- /value -->": "unknown value 'ms 09 gqa-batch'",
            "<!-- value:least 09 single- -->x<!-- /value -->": "expected a sweep with a target, one of group-, head-dim-",
            "<!-- value:run commit -->x<!-- /value -->": "expected run file, logs, rev, day or roof",
            "<!-- value:host-us decode mha-batch -->x<!-- /value -->":
                "has no row for the entry point's decode on mha-batch",
            "<!-- value:host-us launch gqa-batch -->x<!-- /value -->":
                "has no row for the entry point's launch on gqa-batch",
            "<!-- value:host-us decode gqa-batch -->x<!-- /value -->":
                "a row that did not run (refused: no rung runs it) for the entry point's decode on gqa-batch",
            "<!-- value:host-us checked small-batch -->x<!-- /value -->":
                "expected a mode, one of empty-kernels, launch, decode, decode-checked, got 'checked'",
            "<!-- value:host-us small-batch -->x<!-- /value -->": "expected host-us MODE WORKLOAD, got 1 word(s)",
            "<!-- value:us 09 gqa-batch -->500.0": "a value marker without its pair",
            "<!-- value:us 09 gqa-batch -->500\n.0<!-- /value -->": "with a line break or markup inside",
        }
        for body, message in cases.items():
            with self.subTest(body=body):
                self.page(f"Text {body} more.\n")
                for args in (("--check",), ()):
                    result = self.tree.run_script(*args)
                    self.assertEqual(result.returncode, 2, result.stdout)
                    self.assertIn("docs/pages/p.md: ", result.stderr)
                    self.assertIn(message, result.stderr)

    def test_the_torch_log_region(self):
        self.page("<!-- torch-log:begin -->\nold\n<!-- torch-log:end -->\n")
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertIn("No test summary in `docs/results/nvidia-h200-20261130-abc1234/gpu-torch.log`",
                      self.tree.text("docs/pages/p.md"))
        logs = self.tree.results / "nvidia-h200-20261130-abc1234"
        logs.mkdir()
        (logs / "gpu-torch.log").write_text("== building\nninja: done\ntest_decode.py: torch 2.11 on H200; module /x/pagedattn.so\n"
                                            "grid: 3 of 3 shapes passed\n3 passed, 0 failed\n", encoding="utf-8")
        self.assertEqual(self.tree.run_script("--check").returncode, 1)
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertIn("<!-- torch-log:begin -->\n```\ntest_decode.py: torch 2.11 on H200\ngrid: 3 of 3 shapes passed\n"
                      "3 passed, 0 failed\n```\n<!-- torch-log:end -->", self.tree.text("docs/pages/p.md"))


class ExercisesRegionTest(unittest.TestCase):
    """The exercises' reports: docs/results/exercise-reports.md pasted into a page of docs/pages/."""

    def setUp(self):
        self.tree = Tree()
        pages = self.tree.root / "docs" / "pages"
        pages.mkdir(parents=True)
        (pages / "debugging.md").write_text(
            "# Debugging\n\n<!-- exercises:begin -->\nold\n<!-- exercises:end -->\n", encoding="utf-8")

    def tearDown(self):
        self.tree.close()

    def test_the_file_is_pasted_and_check_sees_it(self):
        self.tree.write("exercise-reports.md", "```\nexercise 01_missing_barrier\n```\n")
        self.assertEqual(self.tree.run_script("--check").returncode, 1)
        self.assertEqual(self.tree.run_script().returncode, 0)
        page = self.tree.text("docs/pages/debugging.md")
        self.assertIn("<!-- exercises:begin -->\n```\nexercise 01_missing_barrier\n```\n<!-- exercises:end -->", page)
        self.assertEqual(self.tree.run_script("--check").returncode, 0)

    def test_a_missing_file_is_named(self):
        self.assertEqual(self.tree.run_script().returncode, 0)
        self.assertIn("`docs/results/exercise-reports.md` is missing", self.tree.text("docs/pages/debugging.md"))


if __name__ == "__main__":
    unittest.main()
