"""Generates the ladder tables of README.md and docs/pages/mainpage.md.

The source is the ladder table of docs/design/ARCHITECTURE.md, the table whose header is
`| # | target | what it teaches | runs on |`, one row a rung (00 to the last planned one). A rung
is *present* when a folder steps/NN_name/ exists and *planned* otherwise. The generated tables
go between `<!-- ladder:begin -->` and `<!-- ladder:end -->` in each target file that has the
markers:

  README.md                  the step's name links to its folder: [`stepNN_name`](steps/NN_name/)
  docs/pages/mainpage.md     the name links to the step's page where it exists (Doxygen section
                             `stepNN_page`, enabled by docs/CMakeLists.txt for each
                             steps/NN_name/README.md): \\if stepNN_page [...](...) \\else ... \\endif

`scripts/results` calls with_ladder_regions() on the files it rewrites, so `scripts/results`
rewrites these regions and `scripts/results --check` fails when one is out of date. Standard
library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

BEGIN_MARKER = "<!-- ladder:begin -->"
END_MARKER = "<!-- ladder:end -->"

SOURCE = Path("docs") / "design" / "ARCHITECTURE.md"
SOURCE_HEADER = ["#", "target", "what it teaches", "runs on"]
README = Path("README.md")
MAINPAGE = Path("docs") / "pages" / "mainpage.md"

PRESENT = "present"
PLANNED = "planned"

_TARGET_RE = re.compile(r"^`step(\d\d)_([A-Za-z0-9_]+)`$")
_STEP_DIR_RE = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)$")
_REGION_RE = re.compile(re.escape(BEGIN_MARKER) + r"(.*?)" + re.escape(END_MARKER), re.DOTALL)


@dataclass(frozen=True)
class Rung:
    """One row of the design's ladder table."""

    number: int      # 9
    name: str        # "memory_pipeline"
    teaches: str     # the "what it teaches" cell, as written (Markdown)
    runs_on: str     # "emulator + GPU"

    @property
    def nn(self) -> str:
        return f"{self.number:02d}"

    @property
    def folder(self) -> str:
        """The step's folder under steps/: "09_memory_pipeline"."""
        return f"{self.nn}_{self.name}"

    @property
    def target(self) -> str:
        """The step's program: "step09_memory_pipeline"."""
        return f"step{self.folder}"


def split_row(line: str) -> List[str]:
    """The cells of a Markdown table row (a `\\|` inside a cell does not split it)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", body)]


def parse_ladder(text: str, source: str = str(SOURCE)) -> List[Rung]:
    """The rungs of the ladder table in \\p text (ARCHITECTURE.md). Raises ValueError naming
    \\p source and the line when the table is missing or a row is malformed."""
    lines = text.splitlines()
    start = None
    for index, line in enumerate(lines):
        if line.lstrip().startswith("|") and split_row(line) == SOURCE_HEADER:
            start = index
            break
    if start is None:
        raise ValueError(f"{source}: no ladder table (a table whose header is "
                         f"'| {' | '.join(SOURCE_HEADER)} |')")
    if start + 1 >= len(lines) or not re.fullmatch(r"\s*\|[\s:|-]+\|?\s*", lines[start + 1]):
        raise ValueError(f"{source}:{start + 2}: the ladder table's header has no alignment row under it")
    rungs: List[Rung] = []
    for index in range(start + 2, len(lines)):
        line = lines[index]
        if not line.lstrip().startswith("|"):
            break
        where = f"{source}:{index + 1}"
        cells = split_row(line)
        if len(cells) != len(SOURCE_HEADER):
            raise ValueError(f"{where}: a ladder row needs {len(SOURCE_HEADER)} cells, found {len(cells)}")
        number, target, teaches, runs_on = cells
        match = _TARGET_RE.match(target)
        if not re.fullmatch(r"\d\d", number) or not match:
            raise ValueError(f"{where}: expected '| NN | `stepNN_name` | ... |', found '{line.strip()}'")
        if match.group(1) != number:
            raise ValueError(f"{where}: rung {number} is named {target}: its number and its name disagree")
        rung = Rung(int(number), match.group(2), teaches, runs_on)
        if rungs and rung.number <= rungs[-1].number:
            raise ValueError(f"{where}: rung {rung.nn} comes after rung {rungs[-1].nn}: rows go in ascending order")
        if not teaches or not runs_on:
            raise ValueError(f"{where}: rung {rung.nn} has an empty cell")
        rungs.append(rung)
    if not rungs:
        raise ValueError(f"{source}:{start + 1}: the ladder table has no rows")
    return rungs


def step_folders(root: Path) -> Dict[int, str]:
    """The folders steps/NN_name/ of \\p root, by number. Raises ValueError when two share one."""
    folders: Dict[int, str] = {}
    steps = Path(root) / "steps"
    if not steps.is_dir():
        return folders
    for entry in sorted(steps.iterdir()):
        match = _STEP_DIR_RE.match(entry.name)
        if not entry.is_dir() or not match:
            continue
        number = int(match.group(1))
        if number in folders:
            raise ValueError(f"steps/{folders[number]} and steps/{entry.name} are both step {number:02d}")
        folders[number] = entry.name
    return folders


def statuses(rungs: Sequence[Rung], folders: Dict[int, str], source: str = str(SOURCE)) -> Dict[int, str]:
    """present or planned, by rung. Raises ValueError when a step folder has no row in the table
    or a different name than its row (the design page and the tree must agree)."""
    by_number = {rung.number: rung for rung in rungs}
    for number, folder in sorted(folders.items()):
        rung = by_number.get(number)
        if rung is None:
            raise ValueError(f"steps/{folder} has no row in the ladder table of {source}: add one")
        if rung.folder != folder:
            raise ValueError(f"steps/{folder} is step {number:02d}, which the ladder table of {source} "
                             f"names `{rung.target}`: rename one of them")
    return {rung.number: PRESENT if rung.number in folders else PLANNED for rung in rungs}


def _table(header: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


HEADER = ["#", "step", "what it teaches", "runs on", "status"]


def readme_region(rungs: Sequence[Rung], status: Dict[int, str]) -> str:
    """The text between the ladder markers of README.md."""
    rows = []
    for rung in rungs:
        present = status[rung.number] == PRESENT
        name = f"[`{rung.target}`](steps/{rung.folder}/)" if present else f"`{rung.target}`"
        rows.append([rung.nn, name, rung.teaches, rung.runs_on, status[rung.number]])
    note = ("Generated by `scripts/results` from the ladder table of `docs/design/ARCHITECTURE.md`: a step is "
            "present when its folder `steps/NN_name/` exists; edits between the markers are overwritten.")
    return _table(HEADER, rows) + "\n\n" + note


def mainpage_region(rungs: Sequence[Rung], status: Dict[int, str]) -> str:
    """The text between the ladder markers of docs/pages/mainpage.md (Doxygen Markdown)."""
    rows = []
    for rung in rungs:
        code = f"`{rung.target}`"
        if status[rung.number] == PRESENT:
            link = f"[{rung.target}](../../steps/{rung.folder}/README.md)"
            name = f"\\if step{rung.nn}_page {link} \\else {code} \\endif"
        else:
            name = code
        rows.append([rung.nn, name, rung.teaches, rung.runs_on, status[rung.number]])
    note = ("Generated by `scripts/results` from the ladder table of \\ref design_architecture \"Architecture\"; "
            "a step is present when its folder `steps/NN_name/` exists.")
    return _table(HEADER, rows) + "\n\n" + note


def replace_regions(text: str, content: str) -> str:
    """\\p text with everything between each pair of ladder markers replaced by \\p content."""
    if text.count(BEGIN_MARKER) != text.count(END_MARKER):
        raise ValueError(f"unbalanced {BEGIN_MARKER} / {END_MARKER} markers")
    body = "\n" + content.strip("\n") + "\n"
    return _REGION_RE.sub(lambda _m: BEGIN_MARKER + body + END_MARKER, text)


def load(root: Path) -> Tuple[List[Rung], Dict[int, str]]:
    """The rungs of \\p root's ARCHITECTURE.md and the status of each."""
    source = Path(root) / SOURCE
    if not source.is_file():
        raise ValueError(f"{SOURCE.as_posix()} not found: the ladder regions are generated from its ladder table")
    rungs = parse_ladder(source.read_text(encoding="utf-8"), SOURCE.as_posix())
    return rungs, statuses(rungs, step_folders(root), SOURCE.as_posix())


def with_ladder_regions(root: Path, files: Sequence[Tuple[Path, str]]) -> List[Tuple[Path, str]]:
    """\\p files (file, its new text), with the ladder regions of README.md and
    docs/pages/mainpage.md rewritten in them; a target not in \\p files is read from \\p root and
    added when it has markers. Files without markers are left as they are, and without any
    markers ARCHITECTURE.md is not read."""
    root = Path(root)
    out = list(files)
    index = {Path(path).resolve(): i for i, (path, _text) in enumerate(out)}
    loaded: Optional[Tuple[List[Rung], Dict[int, str]]] = None
    for relative, region in ((README, readme_region), (MAINPAGE, mainpage_region)):
        path = root / relative
        position = index.get(path.resolve())
        if position is not None:
            text = out[position][1]
        elif path.is_file():
            text = path.read_text(encoding="utf-8")
        else:
            continue
        if BEGIN_MARKER not in text and END_MARKER not in text:
            continue
        if loaded is None:
            loaded = load(root)
        try:
            new_text = replace_regions(text, region(*loaded))
        except ValueError as error:
            raise ValueError(f"{relative.as_posix()}: {error}") from None
        if position is not None:
            out[position] = (out[position][0], new_text)
        else:
            out.append((path, new_text))
    return out
