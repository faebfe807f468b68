"""Reads the recorded benchmark results in docs/results/ and turns them into tables.

Shared by `scripts/results` (which rewrites the README regions) and `notebooks/ladder.ipynb`
(which plots). Standard library only.

The files are Google Benchmark JSON (`--benchmark_format=json`) written by `bench_ladder`
(harness/bench.h). Benchmark names have the form

    step03_naive_decode/gpu/gqa-batch[/iterations:1/manual_time]    median GPU time, GB/s, ...
    step03_naive_decode/gpu/gqa-batch/checked[/...]                 the same in checked mode
    step03_naive_decode/traffic/gqa-batch[/iterations:1]            predicted_bytes (emulator)
    step03_naive_decode/emulator/tour                                emulator CPU time

and each result is indexed by (step number, kernel name, kind, workload). A GPU run is a file
with `/gpu/` results; the newest one (by the date in its JSON context) is used unless a path is
given. The emulator's traffic comes from the GPU file itself when it has `/traffic/` results,
otherwise from the newest file that does (normally docs/results/emulator-traffic.json).

Every number printed comes from the JSON; nothing here is typed by hand.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent  # the repository (scripts/..)

BEGIN_MARKER = "<!-- results:begin -->"
END_MARKER = "<!-- results:end -->"
NO_GPU_RESULTS = "No GPU results yet: run scripts/gpu-bench on a GPU machine."

# The named workloads of docs/design/BENCHMARKS.md, in the order the tables show them. Workloads
# found in the JSON but not listed here (other than the sweep) follow in alphabetical order.
NAMED_WORKLOADS = ["gqa-batch", "mha-batch", "long-single", "small-batch", "ragged-skew", "ragged-uniform"]
LATER_WORKLOADS = ["gqa-batch-fp8"]
SWEEP_PREFIX = "sweep-"


@dataclass(frozen=True)
class ShapeSweep:
    """One shape sweep of docs/design/BENCHMARKS.md: `gqa-batch` with one thing changed,
    recorded from step 08 on as `stepNN_x/gpu/<prefix><point>` (harness/bench.cpp)."""

    title: str                # "group size"
    prefix: str               # "group-"
    symbol: str               # "g": the column headers read "g = 1", "2", ...
    points: Tuple[int, ...]   # the points BENCHMARKS.md names, in order
    gqa_batch_point: int      # the point that is gqa-batch itself: not timed again, read from its row (0: none)
    shape: str                # the heads at a point, for the table's caption
    batch: str = "64 sequences of 8192 tokens as in `gqa-batch`"  # the sequences, for the caption
    target: bool = True       # whether SHAPE_SWEEP_TARGET_PCT holds at every point

    def label(self, point: int) -> str:
        """A point as the tables and plots write it: 1024 is "1k" and 1048576 "1M" when the points
        are token counts (their multiples of 1024), else the number."""
        if point >= 1024 and point % 1024 == 0 and min(self.points) >= 1024:
            return f"{point // 1048576}M" if point % 1048576 == 0 else f"{point // 1024}k"
        return str(point)


GROUP_SWEEP = ShapeSweep("group size", "group-", "g", (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32), 4,
                         "8·g query heads over 8 KV heads, head dim 128")
HEAD_DIM_SWEEP = ShapeSweep("head dim", "head-dim-", "d", (64, 80, 96, 112, 128, 256), 128,
                            "32 query heads over 8 KV heads")
# The context sweep of one sequence (issue 19): where a long context is one sequence, every program
# of the machine must share its tokens. No target at every point: 1k tokens are 4 MB, read in less
# than a launch's cost.
SINGLE_SWEEP = ShapeSweep("context length", "single-", "n", tuple(1024 << k for k in range(11)), 0,
                          "32 query heads over 8 KV heads, head dim 128", "one sequence of n tokens", False)
SHAPE_SWEEPS = (GROUP_SWEEP, HEAD_DIM_SWEEP, SINGLE_SWEEP)
FIRST_SHAPE_SWEEP_STEP = 8       # the first step whose kernel reads K and V once for the whole group
SHAPE_SWEEP_TARGET_PCT = 85.0    # docs/design/BENCHMARKS.md: at every point, % of the datasheet


def is_sweep_workload(workload: str) -> bool:
    """A point of the context sweep or of a shape sweep, not a named workload."""
    return any(workload.startswith(prefix) for prefix in (SWEEP_PREFIX,) + tuple(s.prefix for s in SHAPE_SWEEPS))

KINDS = ("gpu", "traffic", "emulator")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_KERNEL_RE = re.compile(r"^step(\d+)_\w+$")
_STEP_DIR_RE = re.compile(r"^(\d+)_\w+$")

Key = Tuple[int, str, str, str]  # (step, kernel, kind, workload)


# ----------------------------------------------------------------------------------------------
# Parsing


@dataclass
class Result:
    """One benchmark of one run: a step's kernel on one workload."""

    step: int
    kernel: str                # "step03_naive_decode"
    kind: str                  # "gpu", "traffic" or "emulator"
    workload: str              # "gqa-batch", "sweep-4096", "tour"
    seconds: Optional[float]   # real_time in seconds (the median GPU time for kind "gpu")
    counters: Dict[str, float] = field(default_factory=dict)
    error: Optional[str] = None  # the error message when the benchmark did not run

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def refused(self) -> bool:
        """The kernel declined the workload (a documented limit, e.g. step 04's shared memory)."""
        return self.error is not None and self.error.startswith("refused")

    def counter(self, name: str) -> Optional[float]:
        value = self.counters.get(name)
        return float(value) if isinstance(value, (int, float)) else None


def parse_name(name: str) -> Optional[Tuple[int, str, str, str]]:
    """`stepNN_x/kind/workload[/iterations:1/manual_time]` -> (NN, kernel, kind, workload).

    Returns None for a name that is not one of the ladder's benchmarks.
    """
    parts = [p for p in name.split("/") if p and ":" not in p and p not in ("manual_time", "real_time", "process_time")]
    if len(parts) < 3:
        return None
    if len(parts) > 3:  # `.../<workload>/variant-V`: an ablation (parse_variant_name), not the step itself
        return None
    kernel, kind, workload = parts[0], parts[1], parts[2]
    match = _KERNEL_RE.match(kernel)
    if not match or kind not in KINDS:
        return None
    return int(match.group(1)), kernel, kind, workload


_VARIANT_RE = re.compile(r"^variant-(\d+)$")
VariantKey = Tuple[int, str, int]  # (step, workload, variant)


def parse_variant_name(name: str) -> Optional[VariantKey]:
    """`stepNN_x/gpu/<workload>/variant-V[/iterations:1/manual_time]` -> (NN, workload, V): one of a
    step's ablations (options.variant), timed like the step on a named workload."""
    parts = [p for p in name.split("/") if p and ":" not in p and p not in ("manual_time", "real_time", "process_time")]
    if len(parts) != 4 or parts[1] != "gpu":
        return None
    kernel_match, variant_match = _KERNEL_RE.match(parts[0]), _VARIANT_RE.match(parts[3])
    if not kernel_match or not variant_match:
        return None
    return int(kernel_match.group(1)), parts[2], int(variant_match.group(1))


def parse_checked_name(name: str) -> Optional[Tuple[int, str]]:
    """`stepNN_x/gpu/<workload>/checked[/iterations:1/manual_time]` -> (NN, workload): the step timed
    on a named workload with checked mode on (DecodeView::checked), for the mode's cost."""
    parts = [p for p in name.split("/") if p and ":" not in p and p not in ("manual_time", "real_time", "process_time")]
    if len(parts) != 4 or parts[1] != "gpu" or parts[3] != "checked":
        return None
    match = _KERNEL_RE.match(parts[0])
    return (int(match.group(1)), parts[2]) if match else None


ENTRY_POINT = "entry_point"
ENTRY_POINT_MODES = ("empty-kernels", "launch", "decode", "decode-checked")
_RUNG_LABEL_RE = re.compile(r"^step (\d+)\b")


def parse_entry_point_name(name: str) -> Optional[Tuple[str, str]]:
    """`entry_point/gpu/<workload>/host/<mode>[/iterations:1/manual_time]` -> (workload, mode): the
    host time of one call of the entry point on the GPU (steps/bench_entry_point.h), mode `launch`
    (the rung's own launch), `decode` (pa::decode, checked mode off) or `decode-checked`; or of
    the floor under them, `empty-kernels` (two launches of a kernel that does nothing)."""
    parts = [p for p in name.split("/") if p and ":" not in p and p not in ("manual_time", "real_time", "process_time")]
    if (len(parts) == 5 and parts[0] == ENTRY_POINT and parts[1] == "gpu" and parts[3] == "host"
            and parts[4] in ENTRY_POINT_MODES):
        return parts[2], parts[4]
    return None


def rung_of_label(label: str) -> int:
    """The rung an entry-point row ran, from its label (`step 10 (step10_tensor_cores)`); 0 if none."""
    match = _RUNG_LABEL_RE.match(label or "")
    return int(match.group(1)) if match else 0


def variant_label(label: str) -> str:
    """What a variant leaves out, from its benchmark label (the plan's description ends with
    `; variant V: <what it leaves out>`)."""
    match = re.search(r"; variant \d+: (.*)$", label or "")
    return match.group(1).strip() if match else ""


BARE_READ = "bare_read"
BARE_PATTERNS = ("once", "per-query-head")


def parse_bare_name(name: str) -> Optional[Tuple[str, str]]:
    """`bare_read/gpu/<workload>/<pattern>[/iterations:1/manual_time]` -> (workload, pattern)."""
    parts = [p for p in name.split("/") if p and ":" not in p and p not in ("manual_time", "real_time", "process_time")]
    if len(parts) == 4 and parts[0] == BARE_READ and parts[1] == "gpu" and parts[3] in BARE_PATTERNS:
        return parts[2], parts[3]
    return None


def bare_pattern(step: int) -> str:
    """The access pattern of a step's kernel: from step 08 on, a program reads a KV head's bytes
    once for its whole query-head group; up to step 07 each query head's program reads them."""
    return "once" if step >= 8 else "per-query-head"


def _parse_date(text: str) -> datetime:
    try:
        date = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return datetime.min.replace(tzinfo=timezone.utc)
    return date if date.tzinfo else date.replace(tzinfo=timezone.utc)


def _is_benchmark_json(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("context"), dict) and isinstance(data.get("benchmarks"), list)


@dataclass
class Run:
    """One Google Benchmark output file."""

    path: Path
    context: Dict[str, object]
    results: Dict[Key, Result]
    bare: Dict[Tuple[str, str], Result] = field(default_factory=dict)  # (workload, pattern)
    variants: Dict[VariantKey, Result] = field(default_factory=dict)  # (step, workload, variant)
    variant_labels: Dict[Tuple[int, int], str] = field(default_factory=dict)  # (step, variant) -> what it leaves out
    checked: Dict[Tuple[int, str], Result] = field(default_factory=dict)  # (step, workload): checked mode on
    entry_point: Dict[Tuple[str, str], Result] = field(default_factory=dict)  # (workload, mode): host µs a call

    @classmethod
    def from_json(cls, data: dict, path: Path) -> "Run":
        if not _is_benchmark_json(data):
            raise ValueError(f"{path}: not Google Benchmark JSON (no context and benchmarks)")
        grouped: Dict[Key, List[dict]] = {}
        bare_grouped: Dict[Tuple[str, str], List[dict]] = {}
        variant_grouped: Dict[VariantKey, List[dict]] = {}
        labels: Dict[Tuple[int, int], str] = {}
        checked_grouped: Dict[Tuple[int, str], List[dict]] = {}
        entry_grouped: Dict[Tuple[str, str], List[dict]] = {}
        for bench in data["benchmarks"]:
            if not isinstance(bench, dict):
                continue
            if bench.get("run_type") == "aggregate":
                # With --benchmark_repetitions, keep the median aggregate only.
                if bench.get("aggregate_name") != "median":
                    continue
                name = bench.get("run_name", "")
            else:
                name = bench.get("name", "")
            parsed = parse_name(str(name))
            if parsed:
                grouped.setdefault(parsed, []).append(bench)
            bare = parse_bare_name(str(name))
            if bare:
                bare_grouped.setdefault(bare, []).append(bench)
            variant = parse_variant_name(str(name))
            if variant:
                variant_grouped.setdefault(variant, []).append(bench)
                if variant_label(str(bench.get("label", ""))):
                    labels[(variant[0], variant[2])] = variant_label(str(bench.get("label", "")))
            checked = parse_checked_name(str(name))
            if checked:
                checked_grouped.setdefault(checked, []).append(bench)
            entry = parse_entry_point_name(str(name))
            if entry:
                entry_grouped.setdefault(entry, []).append(bench)
        results = {key: _result_of(key, entries) for key, entries in grouped.items()}
        bare_results = {key: _result_of((0, BARE_READ, "gpu", key[0]), entries) for key, entries in bare_grouped.items()}
        variant_results = {key: _result_of((key[0], f"variant-{key[2]}", "gpu", key[1]), entries)
                           for key, entries in variant_grouped.items()}
        checked_results = {key: _result_of((key[0], "checked", "gpu", key[1]), entries)
                           for key, entries in checked_grouped.items()}
        entry_results = {key: _result_of((rung_of_label(str(entries[0].get("label", ""))), ENTRY_POINT, "gpu", key[0]),
                                         entries)
                         for key, entries in entry_grouped.items()}
        return cls(path=Path(path), context=dict(data["context"]), results=results, bare=bare_results,
                   variants=variant_results, variant_labels=labels, checked=checked_results, entry_point=entry_results)

    # -- context ---------------------------------------------------------------------------------
    def ctx(self, key: str, default: str = "") -> str:
        value = self.context.get(key, default)
        return str(value) if value is not None else default

    def ctx_float(self, key: str) -> Optional[float]:
        try:
            value = float(self.context.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return value if value > 0 else None

    @property
    def date(self) -> datetime:
        return _parse_date(self.ctx("date"))

    @property
    def day(self) -> str:
        return self.ctx("date")[:10]

    @property
    def gpu_name(self) -> str:
        return self.ctx("gpu", "unknown GPU")

    @property
    def roof_gbps(self) -> Optional[float]:
        """The streaming-read bandwidth measured at the start of the run."""
        return self.ctx_float("roof_gbps")

    @property
    def datasheet_gbps(self) -> Optional[float]:
        return self.ctx_float("datasheet_gbps")

    @property
    def revision(self) -> str:
        return self.ctx("git_revision", "unknown")

    # -- results ---------------------------------------------------------------------------------
    def has(self, kind: str) -> bool:
        return any(key[2] == kind for key in self.results)

    @property
    def is_gpu_run(self) -> bool:
        return self.has("gpu")

    def get(self, step: int, kind: str, workload: str) -> Optional[Result]:
        for (s, _kernel, k, w), result in self.results.items():
            if s == step and k == kind and w == workload:
                return result
        return None

    def steps(self, kind: Optional[str] = None) -> List[int]:
        return sorted({key[0] for key in self.results if kind is None or key[2] == kind})

    def kernel_name(self, step: int) -> Optional[str]:
        for key in self.results:
            if key[0] == step:
                return key[1]
        return None

    def workloads(self, kind: str) -> List[str]:
        return sorted({key[3] for key in self.results if key[2] == kind})

    def named_workloads(self, kind: str = "gpu") -> List[str]:
        """The named workloads (not the sweeps) present, in the order of docs/design/BENCHMARKS.md."""
        return order_workloads(w for w in self.workloads(kind) if not is_sweep_workload(w))

    def sweep(self, kind: str = "gpu") -> List[Tuple[int, str]]:
        """(context, workload name) of the context sweep, shortest first."""
        points = []
        for w in self.workloads(kind):
            if w.startswith(SWEEP_PREFIX) and w[len(SWEEP_PREFIX):].isdigit():
                points.append((int(w[len(SWEEP_PREFIX):]), w))
        return sorted(points)


def order_workloads(workloads: Iterable[str]) -> List[str]:
    present = set(workloads)
    known = [w for w in NAMED_WORKLOADS + LATER_WORKLOADS if w in present]
    return known + sorted(present - set(known))


def _failed(bench: dict) -> bool:
    """Whether a Google Benchmark entry failed or was skipped (its error or skip message says why)."""
    return bool(bench.get("error_occurred") or bench.get("skipped"))


def _result_of(key: Key, entries: List[dict]) -> Result:
    step, kernel, kind, workload = key
    aggregates = [e for e in entries if e.get("run_type") == "aggregate"]
    if aggregates:
        bench = aggregates[0]
    elif len(entries) == 1:
        bench = entries[0]
    elif any(_failed(e) for e in entries):  # a round that failed (its output check, say) fails the row
        bench = next(e for e in entries if _failed(e))
    else:  # repetitions without aggregates (bench_ladder's rounds): the entry with the median time
        ordered = sorted(entries, key=lambda e: float(e.get("real_time", 0.0)))
        bench = ordered[(len(ordered) - 1) // 2]
    error = None
    if _failed(bench):
        error = str(bench.get("error_message") or bench.get("skip_message") or "error")
    seconds = None
    if error is None and isinstance(bench.get("real_time"), (int, float)):
        seconds = float(bench["real_time"]) * _UNIT_SECONDS.get(str(bench.get("time_unit", "ns")), 1e-9)
    standard = {"name", "run_name", "run_type", "family_index", "per_family_instance_index", "repetitions",
                "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
                "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label"}
    counters = {k: float(v) for k, v in bench.items() if k not in standard and isinstance(v, (int, float))
                and not isinstance(v, bool)}
    return Result(step=step, kernel=kernel, kind=kind, workload=workload, seconds=seconds, counters=counters,
                  error=error)


def load_run(path: Path) -> Run:
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
    return Run.from_json(data, Path(path))


def load_runs(results_dir: Path) -> List[Run]:
    """Every Google Benchmark JSON file in \\p results_dir; other files (logs, notes) are skipped."""
    runs = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if _is_benchmark_json(data):
            runs.append(Run.from_json(data, path))
    return runs


def newest_gpu_run(runs: Iterable[Run]) -> Optional[Run]:
    gpu_runs = [run for run in runs if run.is_gpu_run]
    return max(gpu_runs, key=lambda run: (run.date, run.path.name)) if gpu_runs else None


def newest_traffic_run(runs: Iterable[Run]) -> Optional[Run]:
    traffic_runs = [run for run in runs if run.has("traffic")]
    return max(traffic_runs, key=lambda run: (run.date, run.path.name)) if traffic_runs else None


# ----------------------------------------------------------------------------------------------
# The archive: docs/results/ keeps the newest run of each GPU; the runs it replaces go to lab/runs/


RESULTS_DIR = Path("docs") / "results"
ARCHIVE_DIR = Path("lab") / "runs"
PERF_LOG = Path("lab") / "perf-log.md"


def superseded_runs(runs: Iterable[Run]) -> List[Run]:
    """The GPU runs that a newer run of the same GPU (the `gpu` of their context) replaces,
    oldest first: everything `archive` moves."""
    by_gpu: Dict[str, List[Run]] = {}
    for run in runs:
        if run.is_gpu_run:
            by_gpu.setdefault(run.gpu_name, []).append(run)
    old = []
    for group in by_gpu.values():
        newest = newest_gpu_run(group)
        old += [run for run in group if run is not newest]
    return sorted(old, key=lambda run: (run.date, run.path.name))


def _git_tracked(root: Path, path: Path) -> bool:
    try:
        found = subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch", "--",
                                path.relative_to(root).as_posix()], capture_output=True, check=False)
    except OSError:  # no git here
        return False
    return found.returncode == 0


def _move(root: Path, source: Path, dest: Path) -> None:
    """`git mv` where git tracks \\p source, a plain rename otherwise; never over an existing file."""
    if dest.exists():
        raise ValueError(f"{dest} exists already; not moving {source} over it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if _git_tracked(root, source):
        moved = subprocess.run(["git", "-C", str(root), "mv", "--", source.relative_to(root).as_posix(),
                                dest.relative_to(root).as_posix()], capture_output=True, text=True, check=False)
        if moved.returncode != 0:
            raise ValueError(f"git mv {source} {dest}: {moved.stderr.strip()}")
    else:
        source.rename(dest)


def archive(root: Optional[Path] = None) -> List[Tuple[Path, Path]]:
    """Moves every run of docs/results/ that a newer run of the same GPU replaces to lab/runs/:
    its JSON and the folder of its logs (named like the JSON, without `.json`), with `git mv`
    where git tracks them. lab/perf-log.md's mentions of `docs/results/<run>` then name
    `lab/runs/<run>`. Returns the (from, to) pairs moved; nothing when each GPU has one run."""
    root = (Path(root) if root is not None else ROOT).resolve()
    results, archived = root / RESULTS_DIR, root / ARCHIVE_DIR
    moves = []
    for run in superseded_runs(load_runs(results)):
        stem = run.path.name[:-len(".json")] if run.path.name.endswith(".json") else run.path.name
        moves.append((results / run.path.name, archived / run.path.name))
        if (results / stem).is_dir():
            moves.append((results / stem, archived / stem))
    for source, dest in moves:  # check them all before moving any
        if dest.exists():
            raise ValueError(f"{dest} exists already; not moving {source} over it")
    for source, dest in moves:
        _move(root, source, dest)
    log = root / PERF_LOG
    if moves and log.is_file():
        text = new = log.read_text(encoding="utf-8")
        for source, dest in moves:
            tail = "/" if dest.is_dir() else ""  # a folder: only paths inside it
            new = new.replace(source.relative_to(root).as_posix() + tail, dest.relative_to(root).as_posix() + tail)
        if new != text:
            log.write_text(new, encoding="utf-8")
    return moves


# ----------------------------------------------------------------------------------------------
# The ladder: one GPU run, with the emulator's traffic next to it


@dataclass
class StepRow:
    """One row of a step's table (raw numbers; None where there is nothing to show)."""

    workload: str
    status: str                        # "ok", "refused", "error" or "missing"
    error: Optional[str]
    seconds: Optional[float]
    gbps: Optional[float]
    pct_roof: Optional[float]
    pct_datasheet: Optional[float]
    floor_seconds: Optional[float]     # predicted bytes / roof
    time_over_floor: Optional[float]
    speedup: Optional[float]           # time of the previous rung / this time
    speedup_vs: Optional[int]          # the step it is compared with
    bare_seconds: Optional[float] = None    # the bare read of the same bytes in this step's pattern
    time_over_bare: Optional[float] = None


@dataclass
class Ladder:
    root: Path
    gpu: Optional[Run]
    traffic: Optional[Run]
    runs: List[Run]

    # -- what is there ---------------------------------------------------------------------------
    def steps(self) -> List[int]:
        """The rungs: steps with GPU results, or with traffic when there is no GPU run."""
        if self.gpu is not None:
            return self.gpu.steps("gpu")
        return self.traffic.steps("traffic") if self.traffic is not None else []

    def kernel_name(self, step: int) -> str:
        for run in (self.gpu, self.traffic):
            if run is not None and run.kernel_name(step):
                return run.kernel_name(step)  # type: ignore[return-value]
        return f"step{step:02d}"

    def named_workloads(self) -> List[str]:
        if self.gpu is not None:
            return self.gpu.named_workloads("gpu")
        return self.traffic.named_workloads("traffic") if self.traffic is not None else []

    def previous_rung(self, step: int) -> Optional[int]:
        earlier = [s for s in self.steps() if s < step]
        return earlier[-1] if earlier else None

    # -- numbers ---------------------------------------------------------------------------------
    def gpu_result(self, step: int, workload: str) -> Optional[Result]:
        return self.gpu.get(step, "gpu", workload) if self.gpu is not None else None

    def predicted_bytes(self, step: int, workload: str) -> Optional[float]:
        result = self.traffic.get(step, "traffic", workload) if self.traffic is not None else None
        return result.counter("predicted_bytes") if result is not None and result.ok else None

    def floor_seconds(self, step: int, workload: str) -> Optional[float]:
        """The emulator's predicted bytes moved at the measured roof: the fastest this step can be."""
        predicted = self.predicted_bytes(step, workload)
        roof = self.gpu.roof_gbps if self.gpu is not None else None
        if predicted is None or roof is None:
            return None
        return predicted / (roof * 1e9)

    @property
    def has_bare_reads(self) -> bool:
        return self.gpu is not None and bool(self.gpu.bare)

    def bare_read(self, workload: str, pattern: str) -> Optional[Result]:
        result = self.gpu.bare.get((workload, pattern)) if self.gpu is not None else None
        return result if result is not None and result.ok and result.seconds else None

    def bare_seconds(self, step: int, workload: str) -> Optional[float]:
        """The bare read of \\p workload's bytes in \\p step's access pattern (bare_pattern)."""
        result = self.bare_read(workload, bare_pattern(step))
        return result.seconds if result is not None else None

    # -- the shape sweeps ------------------------------------------------------------------------
    def shape_sweep_steps(self) -> List[int]:
        """The rungs the shape sweeps are recorded for: step 08 on."""
        return [step for step in self.steps() if step >= FIRST_SHAPE_SWEEP_STEP] if self.gpu is not None else []

    def has_shape_sweeps(self) -> bool:
        """Whether the GPU run recorded any point of a shape sweep."""
        return any(self.recorded(sweep) for sweep in SHAPE_SWEEPS)

    def recorded(self, sweep: ShapeSweep) -> bool:
        """Whether the GPU run recorded any point of \\p sweep."""
        return self.gpu is not None and any(w.startswith(sweep.prefix) for w in self.gpu.workloads("gpu"))

    def shape_points(self, sweep: ShapeSweep) -> List[int]:
        """\\p sweep's points: those BENCHMARKS.md names and any other the run recorded, in order."""
        found = set()
        for workload in self.gpu.workloads("gpu") if self.gpu is not None else []:
            number = workload[len(sweep.prefix):]
            if workload.startswith(sweep.prefix) and number.isdigit():
                found.add(int(number))
        return sorted(found | set(sweep.points))

    def shape_result(self, step: int, sweep: ShapeSweep, point: int) -> Optional[Result]:
        """\\p step's result at one point of \\p sweep; the point that is gqa-batch is its row."""
        result = self.gpu_result(step, f"{sweep.prefix}{point}")
        if result is None and sweep.gqa_batch_point and point == sweep.gqa_batch_point:
            result = self.gpu_result(step, "gqa-batch")
        return result

    def shape_series(self, step: int, sweep: ShapeSweep) -> List[Tuple[int, float]]:
        """(point, % of the datasheet) at each point \\p step ran, for the plots."""
        series = []
        for point in self.shape_points(sweep):
            result = self.shape_result(step, sweep, point)
            pct = self.pct_datasheet(result) if result is not None and result.ok else None
            if pct is not None:
                series.append((point, pct))
        return series

    def pct_datasheet(self, result: Result) -> Optional[float]:
        """\\p result's % of the datasheet bandwidth: its counter, or its GB/s over the run's datasheet."""
        pct = result.counter("pct_datasheet")
        gbps = result.counter("GB/s")
        if pct is None and gbps is not None and self.gpu is not None and self.gpu.datasheet_gbps:
            pct = 100.0 * gbps / self.gpu.datasheet_gbps
        return pct

    @property
    def roof_pct_datasheet(self) -> Optional[float]:
        """The roof measured in the run, as % of the datasheet bandwidth."""
        gpu = self.gpu
        if gpu is None or not gpu.roof_gbps or not gpu.datasheet_gbps:
            return None
        return 100.0 * gpu.roof_gbps / gpu.datasheet_gbps

    def speedup(self, step: int, workload: str) -> Tuple[Optional[float], Optional[int]]:
        """(time of the nearest earlier rung that ran the workload / this step's time, that rung)."""
        this = self.gpu_result(step, workload)
        if this is None or not this.ok or not this.seconds:
            return None, None
        for earlier in reversed([s for s in self.steps() if s < step]):
            prev = self.gpu_result(earlier, workload)
            if prev is not None and prev.ok and prev.seconds:
                return prev.seconds / this.seconds, earlier
        return None, None

    def step_rows(self, step: int) -> List[StepRow]:
        rows = []
        for workload in self.named_workloads():
            result = self.gpu_result(step, workload)
            floor = self.floor_seconds(step, workload)
            if result is None or not result.ok:
                status = "missing" if result is None else ("refused" if result.refused else "error")
                rows.append(StepRow(workload, status, result.error if result else None, None, None, None, None,
                                    floor, None, None, None, self.bare_seconds(step, workload)))
                continue
            gbps = result.counter("GB/s")
            pct_roof = result.counter("pct_roof")
            if pct_roof is None and gbps is not None and self.gpu.roof_gbps:  # type: ignore[union-attr]
                pct_roof = 100.0 * gbps / self.gpu.roof_gbps  # type: ignore[union-attr]
            pct_datasheet = self.pct_datasheet(result)
            ratio = result.seconds / floor if floor and result.seconds else None
            speedup, versus = self.speedup(step, workload)
            bare = self.bare_seconds(step, workload)
            over_bare = result.seconds / bare if bare and result.seconds else None
            rows.append(StepRow(workload, "ok", None, result.seconds, gbps, pct_roof if pct_roof else None,
                                pct_datasheet, floor, ratio, speedup, versus, bare, over_bare))
        return rows

    def named_rounds(self) -> int:
        """How many rounds the named workloads' rows ran in (the context key named_rounds, harness/bench.h);
        1 for a run from before the rounds."""
        rounds = self.gpu.ctx_float("named_rounds") if self.gpu is not None else None
        return max(1, int(rounds)) if rounds else 1

    def runs_per_median(self) -> Optional[int]:
        """The launches most GPU rows take their median of (the counter runs), or None."""
        counts = self._runs_counts()
        return max(counts, key=lambda runs: (counts[runs], runs)) if counts else None

    def fewer_runs(self) -> Optional[str]:
        """Where some GPU rows take fewer launches than runs_per_median(), which and why: "5 where
        one launch takes over 10 ms" from the run's long_launch_* keys (harness/bench.cpp), else
        how many rows; None where every row takes as many."""
        counts = self._runs_counts()
        most = self.runs_per_median()
        fewer = sorted(runs for runs in counts if most is not None and runs < most)
        if not fewer:
            return None
        assert self.gpu is not None
        threshold, long_runs = self.gpu.ctx("long_launch_ms"), self.gpu.ctx("long_launch_runs")
        if threshold and long_runs and fewer == [int(long_runs)]:
            return f"{long_runs} where one launch takes over {threshold} ms"
        rows = sum(counts[runs] for runs in fewer)
        return f"{', '.join(str(runs) for runs in fewer)} for {rows} row{'s' if rows != 1 else ''}"

    def _runs_counts(self) -> Dict[int, int]:
        counts: Dict[int, int] = {}
        if self.gpu is None:
            return counts
        for result in self.gpu.results.values():
            if result.kind == "gpu" and result.counter("runs"):
                runs = int(result.counter("runs"))  # type: ignore[arg-type]
                counts[runs] = counts.get(runs, 0) + 1
        return counts

    def sm_clock_range(self) -> Optional[Tuple[float, float]]:
        """The lowest and highest SM clock (MHz) read right after the GPU rows' timed launches
        (the counter sm_mhz), or None for a run that did not read it."""
        if self.gpu is None:
            return None
        clocks = [result.counter("sm_mhz") for result in self.gpu.results.values() if result.kind == "gpu"]
        clocks = [c for c in clocks if c]
        return (min(clocks), max(clocks)) if clocks else None

    # -- words -----------------------------------------------------------------------------------
    def stamp_line(self) -> str:
        """One line: GPU, measured roof, datasheet, revision, date (see stamp_line)."""
        return stamp_line(self.gpu) if self.gpu is not None else NO_GPU_RESULTS

    def relative(self, path: Path) -> str:
        """\\p path from the repository root where it lies inside it."""
        try:
            return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def source_path(self, run: Run) -> str:
        return self.relative(run.path)


def stamp_line(run: Run) -> str:
    """The run in one line, e.g.

    NVIDIA H200 · roof 4570 GB/s (measured) · datasheet 4814 GB/s · rev abc123 · 2026-11-30
    """
    parts = [run.gpu_name]
    if run.roof_gbps:
        parts.append(f"roof {fmt_gbps(run.roof_gbps)} GB/s (measured)")
    if run.datasheet_gbps:
        parts.append(f"datasheet {fmt_gbps(run.datasheet_gbps)} GB/s")
    parts.append(f"rev {run.revision}")
    if run.day:
        parts.append(run.day)
    return " · ".join(parts)


def load(root: Optional[Path] = None, gpu_path: Optional[Path] = None,
         traffic_path: Optional[Path] = None) -> Ladder:
    """The ladder of \\p root (default: this repository): the newest GPU run in docs/results/, or
    \\p gpu_path; the traffic from the GPU file, or \\p traffic_path, or the newest traffic file."""
    root = Path(root) if root is not None else ROOT
    runs = load_runs(root / "docs" / "results")
    gpu = load_run(Path(gpu_path)) if gpu_path is not None else newest_gpu_run(runs)
    if gpu is not None and not gpu.is_gpu_run:
        raise ValueError(f"{gpu.path}: no /gpu/ results in this file")
    if traffic_path is not None:
        traffic = load_run(Path(traffic_path))
    elif gpu is not None and gpu.has("traffic"):
        traffic = gpu
    else:
        traffic = newest_traffic_run(runs)
    return Ladder(root=root, gpu=gpu, traffic=traffic, runs=runs)


# ----------------------------------------------------------------------------------------------
# Formatting


DASH = "–"


def fmt_ms(seconds: Optional[float]) -> str:
    """Milliseconds with 3 significant digits (0.0412, 1.23, 45.6, 789; larger values whole)."""
    if seconds is None:
        return DASH
    ms = seconds * 1e3
    if ms <= 0:
        return "0"
    if ms >= 100:
        return f"{ms:.0f}"
    decimals = 2 - math.floor(math.log10(ms))
    text = f"{ms:.{decimals}f}"
    if float(text) >= 100:  # rounding up crossed into the next decade (99.96 -> 100.0)
        return f"{ms:.0f}"
    return text


def fmt_us(seconds: Optional[float]) -> str:
    """Microseconds with 3 significant digits, as fmt_ms writes milliseconds (45.3, 504, 1390)."""
    return fmt_ms(seconds * 1e3 if seconds is not None else None)


def fmt_gbps(value: Optional[float]) -> str:
    return DASH if value is None else f"{value:.0f}"


def fmt_pct(value: Optional[float]) -> str:
    return DASH if value is None else f"{value:.1f}%"


def fmt_ratio(value: Optional[float]) -> str:
    """A ratio with 3 significant digits and a times sign: 1.85×, 12.3×, 105×."""
    if value is None:
        return DASH
    if value >= 99.95:
        return f"{value:.0f}×"
    if value >= 9.995:
        return f"{value:.1f}×"
    return f"{value:.2f}×"


def fmt_bytes(value: Optional[float]) -> str:
    """Decimal bytes with 3 significant digits (1.23 GB)."""
    if value is None:
        return DASH
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _code(text: str) -> str:
    """Text as a Markdown code span (safe for GitHub and Doxygen alike)."""
    text = " ".join(str(text).split()).replace("`", "'")
    return f"`{text}`"


def markdown_table(header: List[str], rows: List[List[str]], align: Optional[List[str]] = None) -> str:
    def line(cells: List[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    align = align or ["---"] * len(header)
    return "\n".join([line(header), "|" + "|".join(align) + "|"] + [line(row) for row in rows])


# ----------------------------------------------------------------------------------------------
# The generated regions


def _result_cell(result: Optional[Result], text) -> str:
    """A table cell: – for no result, refused or error for one that did not run, else text(result)."""
    if result is None:
        return DASH
    if not result.ok:
        return "refused" if result.refused else "error"
    return text(result)


def ladder_table(ladder: Ladder) -> str:
    """README.md: rows = rungs, columns = named workloads, cells = GB/s (% of datasheet)."""
    workloads = ladder.named_workloads()
    rows = []
    for step in ladder.steps():
        cells = [f"{step:02d}", _code(ladder.kernel_name(step))]
        for workload in workloads:
            cells.append(_result_cell(ladder.gpu_result(step, workload),
                                      lambda r: f"{fmt_gbps(r.counter('GB/s'))} ({fmt_pct(r.counter('pct_datasheet'))})"))
        rows.append(cells)
    header = ["#", "step"] + [_code(w) for w in workloads]
    return markdown_table(header, rows, ["---", "---"] + ["--:"] * len(workloads))


def bare_read_table(ladder: Ladder) -> str:
    """README.md: per named workload, the bare reads of its bytes in both patterns."""
    rows = []
    for workload in ladder.named_workloads():
        if all(ladder.bare_read(workload, pattern) is None for pattern in BARE_PATTERNS):
            continue  # a variant the bare reads do not cover (gqa-batch-nhd: the same bytes as gqa-batch)
        cells = [_code(workload)]
        for pattern in BARE_PATTERNS:
            result = ladder.bare_read(workload, pattern)
            if result is None:
                cells.append(DASH)
            else:
                cells.append(f"{fmt_ms(result.seconds)} ({fmt_pct(result.counter('pct_datasheet'))})")
        rows.append(cells)
    header = ["workload", "read once (ms, % of datasheet)", "read once per query head (ms, % of datasheet)"]
    return markdown_table(header, rows, ["---", "--:", "--:"])


TARGETS_NOTE = ("Where a target is missed, the time it asks for is the workload's bytes at that share of the "
                "datasheet (for a ratio, the other workload's time over it). The bare read is of the same bytes in "
                "one launch with nothing else to do, with the same launch, events and L2 flush: a time no kernel of "
                "that pattern is likely to beat.")


BARE_READ_NOTE = ("A bare read is a kernel that only reads the workload's bytes, in chunks of one KV head's tokens: "
                  "each chunk by one program (the pattern of step 08 on), or by each query head's program of the group, "
                  "next to each other in launch order (what steps 03-07 read); "
                  "the fastest of chunks of 256 and 1024 "
                  "tokens and 128 and 256 threads, L2 flushed, in the same run.")


@dataclass(frozen=True)
class Target:
    """A named workload's target for the fastest rung (docs/design/BENCHMARKS.md, "Named
    workloads"): at least \\p pct of the datasheet bandwidth (and \\p roof_pct of the roof measured
    in the same run), or at least \\p ratio times as fast in wall time as the fastest rung on
    \\p faster_than."""
    workload: str
    pct: Optional[float] = None
    roof_pct: Optional[float] = None
    faster_than: Optional[str] = None
    ratio: Optional[float] = None

    def text(self) -> str:
        if self.ratio is not None:
            return f"≥ {self.ratio:g}× as fast as {_code(self.faster_than or '')}"
        text = f"≥ {self.pct:g}%"
        return text + (f" (≥ {self.roof_pct:g}% of the roof)" if self.roof_pct is not None else "")


# The table of docs/design/BENCHMARKS.md, "Named workloads"; scripts/test_results.py checks that
# the two agree.
TARGETS = (Target("gqa-batch", 91.0, roof_pct=96.0), Target("mha-batch", 92.0), Target("long-single", 80.0),
           Target("small-batch", 80.0), Target("ragged-skew", 80.0), Target("ragged-uniform", 88.0),
           Target("gqa-batch-fp8", faster_than="gqa-batch", ratio=1.8))


def fastest_rung(ladder: Ladder, workload: str) -> Optional[Result]:
    """The rung with the shortest time on \\p workload in the GPU run (the first on a tie), or None."""
    ran = [r for r in (ladder.gpu_result(step, workload) for step in ladder.steps()) if r is not None and r.ok and r.seconds]
    return min(ran, key=lambda r: r.seconds) if ran else None


def targets_table(ladder: Ladder) -> Optional[str]:
    """README.md: each named workload's target, the fastest rung's time against it, whether it
    holds and, where it does not, the time it asks for; then the bare read of the same bytes (read
    once), what a kernel of that pattern could hope for. None without a GPU run."""
    if ladder.gpu is None:
        return None
    datasheet = ladder.gpu.datasheet_gbps
    rows = []
    for target in TARGETS:
        best = fastest_rung(ladder, target.workload)
        if best is None:
            continue
        rung = f"step {best.step:02d}: {fmt_us(best.seconds)} µs"
        if target.ratio is not None:
            other = fastest_rung(ladder, target.faster_than or "")
            if other is None:
                continue
            ratio = other.seconds / best.seconds
            measured = f"{rung}, {ratio:.3f}× step {other.step:02d}'s {fmt_us(other.seconds)} µs"
            met = ratio >= target.ratio
            needs = other.seconds / target.ratio
        else:
            pct = ladder.pct_datasheet(best)
            roof = best.counter("pct_roof")
            measured = f"{rung} ({fmt_pct(pct)}" + (f"; {fmt_pct(roof)} of the roof)" if target.roof_pct is not None else ")")
            met = pct is not None and pct >= target.pct and (target.roof_pct is None or (roof is not None and roof >= target.roof_pct))
            moved = best.counter("bytes")
            needs = moved / (target.pct / 100.0 * datasheet * 1e9) if moved and datasheet else None
            if target.roof_pct is not None and moved and ladder.gpu.roof_gbps:
                needs = min(needs, moved / (target.roof_pct / 100.0 * ladder.gpu.roof_gbps * 1e9)) if needs else None
        verdict = "yes" if met else ("no" if needs is None else f"no: {fmt_us(needs)} µs or less")
        bare = ladder.bare_read(target.workload, "once")
        rows.append([_code(target.workload), target.text(), measured, verdict,
                     DASH if bare is None else f"{fmt_us(bare.seconds)} µs ({fmt_pct(bare.counter('pct_datasheet'))})"])
    if not rows:
        return None
    header = ["workload", "target (fastest rung)", "fastest rung in this run", "met", "bare read, once"]
    return markdown_table(header, rows, ["---", "---", "---", "---", "--:"])


def _source_line(ladder: Ladder) -> str:
    assert ladder.gpu is not None
    gpu = ladder.gpu
    details = [d for d in (gpu.ctx("gpu_details"), gpu.ctx("compiler"),
                           f"nvcc {gpu.ctx('cuda_compiler')}" if gpu.ctx("cuda_compiler") else "",
                           gpu.ctx("build_flags")) if d]
    text = f"From {_code(ladder.source_path(gpu))}"
    if details:
        text += " (" + "; ".join(details) + ")"
    return text + "."


def _method_line(ladder: Ladder) -> str:
    runs = ladder.runs_per_median()
    median = f"median of {runs} runs" if runs else "median of the timed runs"
    fewer = ladder.fewer_runs()
    if fewer:
        median += f" ({fewer})"
    flush = "L2 flushed"
    if ladder.gpu is not None:
        # From the l2_flush key on, the flush reads a clean buffer; before it, a memset left the
        # L2 full of dirty lines that the timed kernel wrote back (docs/results/README.md).
        flush = ("L2 flushed by reading twice its size" if ladder.gpu.ctx("l2_flush") == "read"
                 else "L2 flushed by a memset")
    clock = ""
    clocks = ladder.sm_clock_range()
    if clocks is not None:
        low, high = clocks
        span = f"was {low:.0f} MHz throughout" if high - low < 0.01 * high else f"ranged from {low:.0f} to {high:.0f} MHz"
        # bench.cpp reads it with a one-thread probe kernel; v153 measured kernels that issue mma
        # at 1.76-1.82 GHz by ncu's cycle count where nvidia-smi read 1980 MHz.
        clock = (f" The SM clock, measured after each row's runs by a one-thread kernel, {span}; a kernel "
                 "that issues tensor-core `mma` instructions runs below that clock while it does (`lab/perf-log.md`, v153).")
    rounds = ""
    named_rounds = ladder.named_rounds()
    if named_rounds > 1:
        # harness/bench.h, register_named_rounds: a row's name repeats once a round in the JSON.
        rounds = (f" The named workloads' rows and their bare reads ran in {named_rounds} rounds, every rung's row of "
                  "a workload one after another in each, backwards every other round; each of their times is the "
                  f"median of its {named_rounds}.")
    return (f"Each time is the {median}, CUDA events, {flush}; "
            "bytes = K+V+q+out+tables per docs/design/BENCHMARKS.md." + rounds + clock)


def readme_region(ladder: Ladder) -> str:
    """The text between the markers of the top-level README.md."""
    generated = ("Generated by `scripts/results` from the JSON in `docs/results/`; "
                 "edits between the markers are overwritten.")
    if ladder.gpu is None:
        return "\n".join([NO_GPU_RESULTS, "", generated])
    gpu = ladder.gpu
    legend = "Each cell: achieved GB/s (% of the datasheet bandwidth)"
    if gpu.roof_gbps:
        legend += f"; the roof measured in the same run is {fmt_gbps(gpu.roof_gbps)} GB/s"
    legend += ". " + _method_line(ladder) + " Each step's page has its own table, with the predicted floor and the speed-up over the previous step."
    lines = [f"**{ladder.stamp_line()}**", "", ladder_table(ladder), "", legend, _source_line(ladder), ""]
    if ladder.has_bare_reads:
        lines += ["Bare reads of the same bytes, the fastest a kernel with each access pattern could hope to be:", "",
                  bare_read_table(ladder), "", BARE_READ_NOTE, ""]
    targets = targets_table(ladder)
    if targets is not None:
        lines += ["The targets of docs/design/BENCHMARKS.md for the fastest rung, in this run:", "", targets, "", TARGETS_NOTE,
                  ""]
    return "\n".join(lines + [generated])


def step_table(ladder: Ladder, step: int) -> str:
    previous = ladder.previous_rung(step)
    speedup_header = f"speed-up vs step {previous:02d}" if previous is not None else "speed-up vs previous step"
    bare = ladder.has_bare_reads
    header = ["workload", "median time (ms)", "GB/s", "% of roof", "% of datasheet",
              "predicted floor (ms)", "time / floor"]
    if bare:
        header += ["bare read (ms)", "time / bare read"]
    header.append(speedup_header)
    rows = []
    for row in ladder.step_rows(step):
        floor = fmt_ms(row.floor_seconds)
        bare_cells = [fmt_ms(row.bare_seconds), fmt_ratio(row.time_over_bare)] if bare else []
        if row.status != "ok":
            rows.append([_code(row.workload), row.status if row.status != "missing" else DASH, DASH, DASH, DASH,
                         floor, DASH] + ([fmt_ms(row.bare_seconds), DASH] if bare else []) + [DASH])
            continue
        speedup = fmt_ratio(row.speedup)
        if row.speedup is not None and row.speedup_vs != previous:
            speedup += f" (vs {row.speedup_vs:02d})"
        rows.append([_code(row.workload), fmt_ms(row.seconds), fmt_gbps(row.gbps), fmt_pct(row.pct_roof),
                     fmt_pct(row.pct_datasheet), floor, fmt_ratio(row.time_over_floor)] + bare_cells + [speedup])
    return markdown_table(header, rows, ["---"] + ["--:"] * (len(header) - 1))


def step_region(ladder: Ladder, step: int, step_dir: Optional[Path] = None) -> str:
    """The text between the markers of steps/NN_name/README.md."""
    measured = ladder.gpu is not None and step in ladder.gpu.steps("gpu")
    if not measured:
        if step_dir is not None and not is_ladder_step(step_dir):
            return (f"Step {step:02d} is not on the GPU ladder, so no GPU results are recorded for it; "
                    f"`build/<preset>/steps/bench{step_dir.name}` times it on your machine.")
        if ladder.gpu is None:
            return NO_GPU_RESULTS
        return f"No GPU results for step {step:02d} in {_code(ladder.source_path(ladder.gpu))}."
    lines = [f"**{ladder.stamp_line()}**", "", step_table(ladder, step), ""]
    for row in ladder.step_rows(step):
        if row.status in ("refused", "error") and row.error:
            lines.append(f"- {_code(row.workload)}: {_code(row.error)}")
    if lines[-1] != "":
        lines.append("")
    note = _method_line(ladder) + " Predicted floor = the emulator's byte count for this step / the measured roof"
    if ladder.traffic is not None:
        note += f" ({_code(ladder.source_path(ladder.traffic))}, rev {ladder.traffic.revision})"
    note += "; time / floor near 1 means the step moves no more than it must at full bandwidth."
    if ladder.has_bare_reads:
        pattern = "once" if bare_pattern(step) == "once" else "once per query head"
        note += (f" Bare read = the same bytes read {pattern}, as this step reads them, by a kernel that does nothing "
                 "else (the top-level README has both patterns); time / bare read near 1 means the step's arithmetic "
                 "and merging are hidden behind its reads.")
    lines += [note, _source_line(ladder), ""]
    return "\n".join(lines)


ABLATION_BEGIN = "<!-- ablation:begin -->"
ABLATION_END = "<!-- ablation:end -->"


def baseline_run(ladder: Ladder) -> Optional[Run]:
    """`baseline.json` in the GPU run's log folder (docs/results/<run>/): the same benchmarks of a
    program built from an earlier revision, run on the same machine in the same session, for a
    before/after comparison. None when there is none."""
    if ladder.gpu is None:
        return None
    path = ladder.gpu.path.with_suffix("") / "baseline.json"
    return load_run(path) if path.is_file() else None


def archived_baseline(ladder: Ladder) -> Optional[Tuple[Run, Run]]:
    """The newest archived GPU run (lab/runs/<run>.json) with a baseline.json in its log folder,
    and that baseline: the before/after comparison where the newest run recorded none. None when
    no archived run has one."""
    found = []
    for path in (ladder.root / ARCHIVE_DIR).glob("*/baseline.json"):
        run_path = path.parent.with_suffix(".json")
        if run_path.is_file():
            found.append((load_run(run_path), path))
    if not found:
        return None
    run, path = max(found, key=lambda pair: (pair[0].date, pair[0].path.name))
    return run, load_run(path)


def _time_and_change(seconds: Optional[float], reference: Optional[float]) -> str:
    if not seconds:
        return DASH
    if not reference:
        return fmt_ms(seconds)
    return f"{fmt_ms(seconds)} ({100.0 * (seconds / reference - 1.0):+.1f}%)"


def ablation_table(ladder: Ladder, step: int) -> Optional[str]:
    """Median times of \\p step and of each of its variants (options.variant, one idea left out)
    on the named workloads, each with its change against the step; then the rung before."""
    run = ladder.gpu
    if run is None:
        return None
    variants = sorted({v for (s, _w, v) in run.variants if s == step})
    if not variants:
        return None
    workloads = [w for w in ladder.named_workloads() if any((step, w, v) in run.variants for v in variants)]
    header = ["left out"] + [f"{_code(w)} (ms)" for w in workloads]

    def seconds(result: Optional[Result]) -> Optional[float]:
        return result.seconds if result is not None and result.ok else None

    full = {w: seconds(ladder.gpu_result(step, w)) for w in workloads}
    rows = [["nothing: " + _code(ladder.kernel_name(step))] + [_time_and_change(full[w], None) for w in workloads]]
    for v in variants:
        label = run.variant_labels.get((step, v), f"variant {v}")
        cells = []
        for w in workloads:
            result = run.variants.get((step, w, v))
            if result is not None and result.refused:
                cells.append("refused")
            else:
                cells.append(_time_and_change(seconds(result), full[w]))
        rows.append([f"{v}: {label}"] + cells)
    previous = ladder.previous_rung(step)
    if previous is not None:
        rows.append([f"all of them: {_code(ladder.kernel_name(previous))}"] +
                    [_time_and_change(seconds(ladder.gpu_result(previous, w)), full[w]) for w in workloads])
    return markdown_table(header, rows, ["---"] + ["--:"] * len(workloads))


def baseline_table(ladder: Ladder, now: Run, step: int, baseline: Run, baseline_step: int) -> Optional[str]:
    """\\p step's median times in \\p now against \\p baseline_step's in \\p baseline, workload by
    workload."""
    rows = []
    for w in ladder.named_workloads():
        this, before = now.get(step, "gpu", w), baseline.get(baseline_step, "gpu", w)
        if this is None or before is None or not this.ok or not before.ok or not this.seconds or not before.seconds:
            continue
        rows.append([_code(w), fmt_ms(this.seconds), fmt_ms(before.seconds), f"{this.seconds / before.seconds:.3f}"])
    if not rows:
        return None
    header = ["workload", f"step {step:02d} at {now.revision} (ms)", f"step {baseline_step:02d} at {baseline.revision} (ms)",
              "ratio"]
    return markdown_table(header, rows, ["---", "--:", "--:", "--:"])


def ablation_region(ladder: Ladder, step: int) -> str:
    """The text between the ablation markers of a step page."""
    table = ablation_table(ladder, step)
    if table is None:
        return f"No ablation results for step {step:02d} in the newest GPU run."
    lines = [f"**{ladder.stamp_line()}**", "", table, "",
             "Each cell: the median time of the step with that one idea left out (options.variant), and its change "
             "against the step with every idea; the last row is the rung before, with none of them. "
             + _method_line(ladder), _source_line(ladder), ""]
    return "\n".join(lines)


BASELINE_BEGIN = "<!-- baseline:begin -->"
BASELINE_END = "<!-- baseline:end -->"


def baseline_region(ladder: Ladder, step: int) -> str:
    """The text between the baseline markers of a step page: \\p step against the same rung in
    the run's baseline.json (or, for a rung the baseline did not have, the highest one below).
    Where the newest GPU run has no baseline, the newest archived run that has one, with its own
    times of the step (both from that run's session), said so."""
    baseline = baseline_run(ladder)
    now, where = ladder.gpu, "in the run above"
    if baseline is None:
        archived = archived_baseline(ladder)
        if archived is not None:
            now, baseline = archived
            where = (f"in the newest archived run with a baseline ({_code(ladder.relative(now.path))}, revision "
                     f"{now.revision}, roof {fmt_gbps(now.roof_gbps)} GB/s; the newest run has none)")
    steps = baseline.steps("gpu") if baseline is not None else []
    earlier = [s for s in steps if s <= step]
    if baseline is None or now is None or not earlier:
        return f"No baseline recorded beside the newest GPU run for step {step:02d}."
    compared = baseline_table(ladder, now, step, baseline, earlier[-1])
    if compared is None:
        return f"No workload that both step {step:02d} and the baseline ran."
    return "\n".join([
        f"Median times of {_code(ladder.kernel_name(step))} {where} and of "
        f"{_code(baseline.kernel_name(earlier[-1]) or '')} as it was at revision {baseline.revision}, built from that "
        f"revision and run on the same machine in the same session ({_code(ladder.relative(baseline.path))}, roof "
        f"{fmt_gbps(baseline.roof_gbps)} GB/s); ratio = this step's time / the baseline's.", "", compared, ""])


SWEEPS_BEGIN = "<!-- sweeps:begin -->"
SWEEPS_END = "<!-- sweeps:end -->"


def shape_sweep_table(ladder: Ladder, sweep: ShapeSweep) -> str:
    """Rows = the rungs from step 08 on, columns = \\p sweep's points, cells = % of the datasheet
    bandwidth (median µs); – where the run has no row for that point."""
    points = ladder.shape_points(sweep)
    rows = []
    for step in ladder.shape_sweep_steps():
        cells = [f"{step:02d}", _code(ladder.kernel_name(step))]
        for point in points:
            cells.append(_result_cell(ladder.shape_result(step, sweep, point),
                                      lambda r: f"{fmt_pct(ladder.pct_datasheet(r))} ({fmt_us(r.seconds)})"))
        rows.append(cells)
    header = ["#", "step"] + [f"{sweep.symbol} = {sweep.label(point)}" if i == 0 else sweep.label(point)
                              for i, point in enumerate(points)]
    return markdown_table(header, rows, ["---", "---"] + ["--:"] * len(points))


def sweeps_region(ladder: Ladder) -> str:
    """The text between `<!-- sweeps:begin -->` and `<!-- sweeps:end -->`: the shape sweeps of
    docs/design/BENCHMARKS.md (group size, head dim, one sequence's context), one table each, every rung from step 08 on.

    A page asks for it by holding the two markers (README.md and any steps/NN_name/README.md,
    step 10's included); `scripts/results` fills every such region with the same text, and
    without sweep rows in the newest GPU run it says so."""
    if ladder.gpu is None:
        return NO_GPU_RESULTS
    if not ladder.has_shape_sweeps():
        return (f"No shape-sweep rows (`group-<g>`, `head-dim-<d>`, `single-<n>`) in {_code(ladder.source_path(ladder.gpu))}: "
                "they are not recorded yet. The next `scripts/gpu-bench` run records them for every rung from "
                f"step {FIRST_SHAPE_SWEEP_STEP:02d} on.")
    lines = [f"**{ladder.stamp_line()}**", ""]
    for sweep in SHAPE_SWEEPS:
        caption = f"{sweep.title[0].upper()}{sweep.title[1:]} {sweep.symbol} ({sweep.shape}; {sweep.batch})"
        if ladder.recorded(sweep):
            lines += [f"{caption}:", "", shape_sweep_table(ladder, sweep), ""]
        else:
            lines += [f"{caption}: no `{sweep.prefix}<{sweep.symbol}>` rows in this run.", ""]
    roof = ladder.roof_pct_datasheet
    legend = ("Each cell: % of the datasheet bandwidth (median µs). The target is "
              f"≥ {SHAPE_SWEEP_TARGET_PCT:.0f}% at every point of the group-size and head-dim sweeps "
              "(docs/design/BENCHMARKS.md); the context sweep of one sequence has none (its short points "
              "take less than a launch costs)")
    if roof is not None:
        legend += f"; the roof measured in the same run is {fmt_pct(roof)}"
    legend += (f". g = {GROUP_SWEEP.gqa_batch_point} and d = {HEAD_DIM_SWEEP.gqa_batch_point} are `gqa-batch` "
               "itself: its row, not timed again; – where the run has no row for the point. " + _method_line(ladder))
    lines += [legend, _source_line(ladder), ""]
    return "\n".join(lines)


CHECKED_BEGIN = "<!-- checked:begin -->"
CHECKED_END = "<!-- checked:end -->"


def fmt_signed_us(seconds: float) -> str:
    """A difference in microseconds with its sign, as fmt_us writes the size (+18.7, -3.20, +312)."""
    return ("-" if seconds < 0 else "+") + fmt_us(abs(seconds))


def checked_cost_table(ladder: Ladder) -> Optional[str]:
    """Rows = the rungs with `/checked` rows, columns = the named workloads, cells = the median
    time with checked mode off -> on (µs), then the difference (µs, % of the time off); None when
    the GPU run has no `/checked` rows."""
    run = ladder.gpu
    if run is None or not run.checked:
        return None
    steps = [step for step in ladder.steps() if any(key[0] == step for key in run.checked)]
    workloads = [w for w in ladder.named_workloads() if any((step, w) in run.checked for step in steps)]

    def cost(step: int, workload: str, on: Result) -> str:
        off = ladder.gpu_result(step, workload)
        if off is None or not off.ok or not off.seconds or on.seconds is None:
            return DASH
        difference = on.seconds - off.seconds
        return (f"{fmt_us(off.seconds)} → {fmt_us(on.seconds)} "
                f"({fmt_signed_us(difference)}, {100.0 * difference / off.seconds:+.1f}%)")

    rows = [[f"{step:02d}", _code(ladder.kernel_name(step))] +
            [_result_cell(run.checked.get((step, w)), lambda on, s=step, w=w: cost(s, w, on)) for w in workloads]
            for step in steps]
    header = ["#", "step"] + [_code(w) for w in workloads]
    return markdown_table(header, rows, ["---", "---"] + ["--:"] * len(workloads))


def checked_region(ladder: Ladder) -> str:
    """The text between `<!-- checked:begin -->` and `<!-- checked:end -->`: what checked mode
    (DecodeView::checked) costs each rung on each named workload, from the GPU run's `/checked`
    rows against its plain ones (harness/bench.h)."""
    if ladder.gpu is None:
        return NO_GPU_RESULTS
    table = checked_cost_table(ladder)
    if table is None:
        return (f"No `/checked` rows in {_code(ladder.source_path(ladder.gpu))}: the next `scripts/gpu-bench` run "
                "records them.")
    legend = ("Each cell: the median time of one launch with checked mode off → on, in µs, and the difference (µs, "
              "% of the time off). Off: the `stepNN_name/gpu/<workload>` row, the kernel alone; on: its `/checked` "
              "row, the same launches with `DecodeView::checked` on. " + _method_line(ladder))
    return "\n".join([f"**{ladder.stamp_line()}**", "", table, "", legend, _source_line(ladder), ""])


TORCH_LOG_BEGIN = "<!-- torch-log:begin -->"
TORCH_LOG_END = "<!-- torch-log:end -->"
TORCH_LOG = "gpu-torch.log"  # what scripts/gpu-bench keeps of the PyTorch extension's test


def torch_log_region(ladder: Ladder) -> str:
    """The text between `<!-- torch-log:begin -->` and `<!-- torch-log:end -->`: the end of the
    PyTorch extension's test as the GPU run's logs keep it (`<run>/gpu-torch.log`), from the line
    that names torch and the GPU, in a code block; or a line that says the run has no such log."""
    if ladder.gpu is None:
        return NO_GPU_RESULTS
    log = ladder.gpu.path.with_suffix("") / TORCH_LOG
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    start = next((i for i, line in enumerate(lines) if line.startswith("test_decode.py:")), None)
    if start is None:
        return f"No test summary in {_code(ladder.relative(log))}: the run did not test the PyTorch extension."
    # The first line names torch, the GPU and the module's path on the GPU machine: not the path.
    first = lines[start].split("; module ")[0]
    return "\n".join(["```", first] + lines[start + 1:] + ["```"])


# ----------------------------------------------------------------------------------------------
# Numbers in prose


VALUE_RE = re.compile(r"<!-- value:(?P<expr>[^<>\n]*?) -->(?P<text>[^<\n]*)<!-- /value -->")
VALUE_OPEN = "<!-- value:"
VALUE_CLOSE = "<!-- /value -->"
# What a value can be, by its first word, and the words after it (README of docs/results/).
VALUE_FORMS = {
    "us": "STEP WORKLOAD: the median time in µs (37.7; from 10000 µs whole)",
    "pct": "STEP WORKLOAD: % of the datasheet bandwidth (74.2%)",
    "bare-us": "STEP WORKLOAD: the bare read of the workload's bytes in STEP's pattern, in µs",
    "bare-pct": "STEP WORKLOAD: that bare read as % of the datasheet bandwidth",
    "clock": "STEP WORKLOAD: the SM clock read after the row's launches, in MHz (1838)",
    "ratio": "STEP WORKLOAD STEP2 WORKLOAD2: how many times faster the first is (time 2 / time 1: 1.82×)",
    "slower": "STEP WORKLOAD STEP2 WORKLOAD2: how much longer the first takes, in % of the second (0.8%); "
              "an error where it is not longer, since the text around it says so",
    "least": "STEP SWEEP: the lowest point of a shape sweep (group- or head-dim-) as % of the datasheet, "
             "and where: 89.7% (g = 32)",
    "host-us": "MODE WORKLOAD: the host's time for one call of the entry point in µs (3.42; 12.3 from 10 µs), "
               "MODE empty-kernels, launch, decode or decode-checked (steps/bench_entry_point.h)",
    "run": "file, logs, rev, day or roof: the run's JSON, its logs folder, revision (7 digits), date, roof (GB/s)",
}


def fmt_value_us(seconds: float) -> str:
    """Microseconds as prose quotes them: one decimal (37.7, 480.1), whole from 10000 µs."""
    us = seconds * 1e6
    return f"{us:.0f}" if us >= 9999.95 else f"{us:.1f}"


def fmt_host_us(seconds: float) -> str:
    """A host time of microseconds as prose quotes it: two decimals under 10 µs (3.42), else as
    fmt_value_us (12.3)."""
    us = seconds * 1e6
    return f"{us:.2f}" if us < 9.995 else fmt_value_us(seconds)


def value_text(ladder: Ladder, expr: str) -> str:
    """The text of the value \p expr (VALUE_FORMS) in \p ladder's GPU run; ValueError naming what
    is wrong when the form is unknown, the row missing or failed, or the sign not the one the
    prose assumes."""
    words = expr.split()
    form = words[0] if words else ""
    if form not in VALUE_FORMS:
        raise ValueError(f"unknown value {expr!r}: the forms are {', '.join(VALUE_FORMS)}")
    run = ladder.gpu
    if run is None:
        raise ValueError(f"value {expr!r}: no GPU run in docs/results/")
    arity = {"ratio": 5, "slower": 5, "run": 2}.get(form, 3)
    if len(words) != arity:
        raise ValueError(f"value {expr!r}: expected {form} {VALUE_FORMS[form].split(':')[0]}, got {len(words) - 1} word(s)")
    if form == "run":
        what = words[1]
        if what == "file":
            return ladder.source_path(run)
        if what == "logs":
            return ladder.relative(run.path.with_suffix("")) + "/"
        if what == "rev":
            return run.revision[:7]
        if what == "day":
            return run.day
        if what == "roof" and run.roof_gbps:
            return fmt_gbps(run.roof_gbps)
        raise ValueError(f"value {expr!r}: expected run file, logs, rev, day or roof")

    if form == "host-us":
        mode, workload = words[1], words[2]
        if mode not in ENTRY_POINT_MODES:
            raise ValueError(f"value {expr!r}: expected a mode, one of {', '.join(ENTRY_POINT_MODES)}, got {mode!r}")
        entry = run.entry_point.get((workload, mode))
        if entry is None or not entry.ok or not entry.seconds:
            state = "no row" if entry is None else f"a row that did not run ({entry.error})"
            raise ValueError(f"value {expr!r}: {ladder.source_path(run)} has {state} for the entry point's {mode} "
                             f"on {workload}")
        return fmt_host_us(entry.seconds)

    def step_of(word: str) -> int:
        if not word.isdigit():
            raise ValueError(f"value {expr!r}: expected a step number, got {word!r}")
        return int(word)

    def row(step_word: str, workload: str) -> Result:
        result = ladder.gpu_result(step_of(step_word), workload)
        if result is None or not result.ok or not result.seconds:
            state = "no row" if result is None else f"a row that did not run ({result.error})"
            raise ValueError(f"value {expr!r}: {ladder.source_path(run)} has {state} for step {step_word} on {workload}")
        return result

    if form == "least":
        sweep = next((sweep for sweep in SHAPE_SWEEPS if sweep.prefix == words[2] and sweep.target), None)
        if sweep is None:
            raise ValueError(f"value {expr!r}: expected a sweep with a target, one of "
                             f"{', '.join(sweep.prefix for sweep in SHAPE_SWEEPS if sweep.target)}")
        series = ladder.shape_series(step_of(words[1]), sweep)
        if not series:
            raise ValueError(f"value {expr!r}: {ladder.source_path(run)} has no {sweep.prefix} rows for step {words[1]}")
        point, pct = min(series, key=lambda item: item[1])
        return f"{fmt_pct(pct)} ({sweep.symbol} = {sweep.label(point)})"
    if form in ("bare-us", "bare-pct"):
        bare = ladder.bare_read(words[2], bare_pattern(step_of(words[1])))
        if bare is None:
            raise ValueError(f"value {expr!r}: {ladder.source_path(run)} has no bare read of {words[2]} "
                             f"in step {words[1]}'s pattern")
        return fmt_value_us(bare.seconds) if form == "bare-us" else fmt_pct(ladder.pct_datasheet(bare))  # type: ignore[arg-type]
    first = row(words[1], words[2])
    if form == "us":
        return fmt_value_us(first.seconds)  # type: ignore[arg-type]
    if form == "pct":
        pct = ladder.pct_datasheet(first)
        if pct is None:
            raise ValueError(f"value {expr!r}: the row has no bandwidth")
        return fmt_pct(pct)
    if form == "clock":
        mhz = first.counter("sm_mhz")
        if not mhz:
            raise ValueError(f"value {expr!r}: the row has no SM clock (counter sm_mhz)")
        return f"{mhz:.0f}"
    second = row(words[3], words[4])
    if form == "ratio":
        return fmt_ratio(second.seconds / first.seconds)  # type: ignore[operator]
    longer = 100.0 * (first.seconds / second.seconds - 1.0)  # type: ignore[operator]
    if longer < 0:
        raise ValueError(f"value {expr!r}: step {words[1]} on {words[2]} is {-longer:.1f}% faster, not slower; "
                         "rewrite the sentence around it")
    return f"{longer:.1f}%"


def fill_values(ladder: Ladder, text: str) -> str:
    """\p text with the text of every value (`<!-- value:EXPR -->TEXT<!-- /value -->`, one line,
    no markup inside) written again from the GPU run: the numbers that prose quotes."""
    found = VALUE_RE.findall(text)
    if len(found) != text.count(VALUE_OPEN) or len(found) != text.count(VALUE_CLOSE):
        raise ValueError(f"a value marker without its pair, or with a line break or markup inside "
                         f"({text.count(VALUE_OPEN)} {VALUE_OPEN}...--> and {text.count(VALUE_CLOSE)} {VALUE_CLOSE})")
    return VALUE_RE.sub(lambda m: f"{VALUE_OPEN}{m['expr']} -->{value_text(ladder, m['expr'])}{VALUE_CLOSE}", text)


def is_ladder_step(step_dir: Path) -> bool:
    """A step whose benchmark is the shared ladder one (bench.cpp is PA_STEP_BENCHMARK_MAIN)."""
    bench = Path(step_dir) / "bench.cpp"
    try:
        return "PA_STEP_BENCHMARK_MAIN" in bench.read_text(encoding="utf-8")
    except OSError:
        return False




@dataclass(frozen=True)
class PastedFile:
    """A region that holds a file a program prints, pasted whole between
    `<!-- NAME:begin -->` and `<!-- NAME:end -->`; the program's ctest fails when the file and
    what the program prints disagree, and `command` writes it again."""
    name: str
    path: Path
    command: str

    @property
    def begin(self) -> str:
        return f"<!-- {self.name}:begin -->"

    @property
    def end(self) -> str:
        return f"<!-- {self.name}:end -->"

    def region(self, root: Path) -> str:
        """The file's text, or a line that says it is missing and how to write it."""
        path = root / self.path
        if not path.is_file():
            return f"`{self.path.as_posix()}` is missing: write it with `{self.command} > {self.path.as_posix()}`."
        return path.read_text(encoding="utf-8")


PASTED_FILES = (
    # The fragment layouts of mma m16n8k16 and ldmatrix, from `mma_layout` in
    # kernels/portable/portable.h (ctest step10_tensor_cores.fragments).
    PastedFile("fragments", Path("docs") / "results" / "mma-fragments.md", "step10_tensor_cores --fragments"),
    # What the exercises' runner prints for every broken kernel of exercises/ (ctest exercises.reports).
    PastedFile("exercises", Path("docs") / "results" / "exercise-reports.md", "exercise --all --markdown"),
    # The work list step 11's plan makes for ragged-skew (ctest step11_persistent.schedule).
    PastedFile("schedule", Path("docs") / "results" / "ragged-skew-schedule.md",
               "step11_persistent --schedule ragged-skew"),
)


def replace_regions(text: str, content: str, begin: str = BEGIN_MARKER, end: str = END_MARKER) -> str:
    """\\p text with everything between each \\p begin / \\p end marker pair replaced by \\p content."""
    if text.count(begin) != text.count(end):
        raise ValueError(f"unbalanced {begin} / {end} markers")
    body = "\n" + content.strip("\n") + "\n"
    pattern = re.compile(re.escape(begin) + r"(.*?)" + re.escape(end), re.DOTALL)
    return pattern.sub(lambda _m: begin + body + end, text)


def _page_regions(ladder: Ladder, text: str, step: Optional[int] = None,
                  step_dir: Optional[Path] = None) -> str:
    """\\p text with each kind of generated region it has rewritten: the results (the ladder table
    on README.md, \\p step's table on its page), and on a step page its ablation and baseline;
    the shape sweeps, the pasted files (PASTED_FILES), the PyTorch test's log (torch_log_region)
    and the values in its prose (fill_values) on either."""
    new = text
    if BEGIN_MARKER in text:
        new = replace_regions(new, readme_region(ladder) if step is None else step_region(ladder, step, step_dir))
    if step is not None and ABLATION_BEGIN in text:
        new = replace_regions(new, ablation_region(ladder, step), ABLATION_BEGIN, ABLATION_END)
    if step is not None and BASELINE_BEGIN in text:
        new = replace_regions(new, baseline_region(ladder, step), BASELINE_BEGIN, BASELINE_END)
    if SWEEPS_BEGIN in text:
        new = replace_regions(new, sweeps_region(ladder), SWEEPS_BEGIN, SWEEPS_END)
    for pasted in PASTED_FILES:
        if pasted.begin in text:
            new = replace_regions(new, pasted.region(ladder.root), pasted.begin, pasted.end)
    if CHECKED_BEGIN in text:
        new = replace_regions(new, checked_region(ladder), CHECKED_BEGIN, CHECKED_END)
    if TORCH_LOG_BEGIN in text:
        new = replace_regions(new, torch_log_region(ladder), TORCH_LOG_BEGIN, TORCH_LOG_END)
    if VALUE_OPEN in text:
        new = fill_values(ladder, new)
    return new


def _page_regions_of(ladder: Ladder, page: Path, text: str, step: Optional[int] = None,
                     step_dir: Optional[Path] = None) -> str:
    """_page_regions for the file \\p page, whose name a ValueError then starts with."""
    try:
        return _page_regions(ladder, text, step, step_dir)
    except ValueError as error:
        raise ValueError(f"{ladder.relative(page)}: {error}") from error


def generated_files(ladder: Ladder) -> List[Tuple[Path, str]]:
    """(file, its new text) for README.md, every steps/NN_name/README.md and every
    docs/pages/*.md with markers (the pages take the regions that are not a step's), and every
    docs/design/*.md with checked markers: the design pages take that region only, since their
    text names the other markers."""
    out = []
    readme = ladder.root / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        new = _page_regions_of(ladder, readme, text)
        if new is not text:
            out.append((readme, new))
    for page in sorted((ladder.root / "steps").glob("*/README.md")):
        match = _STEP_DIR_RE.match(page.parent.name)
        if not match:
            continue
        text = page.read_text(encoding="utf-8")
        new = _page_regions_of(ladder, page, text, int(match.group(1)), page.parent)
        if new is not text:
            out.append((page, new))
    for page in sorted((ladder.root / "docs" / "pages").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        new = _page_regions_of(ladder, page, text)
        if new is not text:
            out.append((page, new))
    for page in sorted((ladder.root / "docs" / "design").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if CHECKED_BEGIN in text:
            out.append((page, replace_regions(text, checked_region(ladder), CHECKED_BEGIN, CHECKED_END)))
    return out
