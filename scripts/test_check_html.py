#!/usr/bin/env python3
"""Tests of scripts/check_html and scripts/check_html_lib.py:  python3 scripts/test_check_html.py

Each rule meets a tiny page that breaks it (written as Doxygen 1.9 writes such a page: an
unresolved \\snippet is an empty div.fragment, a \\ref whose quoted text runs onto the next line
leaves the rest of the paragraph as escaped markup), and a clean page passes. The browser mode runs
with a stand-in browser (a script that prints the file), and with real Chromium when installed.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import check_html_lib as lib  # noqa: E402

SCRIPT = SCRIPTS / "check_html"

CLEAN_BODY = """
<div class="header"><div class="headertitle"><div class="title">Step 06: online softmax</div></div></div>
<div class="contents"><div class="textblock">
<p><a class="anchor" id="md_intro"></a>One pass over the pages; see <a class="el" href="other.html#sec">the other page</a>
and <a href="#md_intro">the top</a>, <b>bold <code>code</code></b>, 2 * 3.</p>
<div class="fragment"><div class="line"><span class="keyword">int</span> main(<span>int</span> argc, char **argv);</div></div>
<p>Code may say anything: <code>**not bold**</code>, <code>\\snippet</code>, <code>&lt;tt&gt;</code>.</p>
<table class="memberdecls"><tr><td class="memItemLeft">int&#160;</td>
<td class="memItemRight">main (int argc, char **argv)</td></tr></table>
<p>Mail me @ home, read vLLM's kernels, or https://example.org/tmp/.</p>
</div></div>
"""


def page(body, title="pagedattn: Step 06: online softmax", page_doc=True):
    end = "</div><!-- PageDoc -->" if page_doc else "</div>"
    return (f"<!DOCTYPE html>\n<html><head><title>{title}</title><script>var s = '**x** /tmp/';</script>"
            f"</head><body><div>{body}{end}</body></html>\n")


def written_findings(body):
    parsed = lib.parse(page(body))
    with tempfile.TemporaryDirectory(prefix="test-check-html.") as folder:
        site = lib.Site(Path(folder))  # an empty folder: Site lists every file below it
    site.files = {"index.html", "other.html"}
    site.remember("index.html", parsed)
    site.remember("other.html", lib.parse('<html><body><a class="anchor" id="design_rules"></a>'
                                          '<h2 id="sec">Sec</h2></body></html>'))
    return lib.check_page("index.html", parsed, "index.html", site)


class RuleTest(unittest.TestCase):
    def assert_caught(self, body, rule, text):
        findings = written_findings(body)
        self.assertTrue(findings, f"nothing caught in {body!r}")
        self.assertEqual({finding.rule for finding in findings}, {rule}, [str(f) for f in findings])
        self.assertIn(text, str(findings[0]))

    def test_clean_page_passes(self):
        self.assertEqual([str(f) for f in written_findings(CLEAN_BODY)], [])

    def test_doxygen_commands_as_text(self):
        for command in ("@section sec_one Title", "\\snippet kernels/06.cuh body", "@ref step07_split_kv",
                        "\\ref step07_split_kv", "@code", "\\code{.cpp}", "\\endcode"):
            with self.subTest(command=command):
                self.assert_caught(f"<p>The kernel.\n\n{command}\n</p>", "raw-markup", command.split()[0])

    def test_literal_bold_marks(self):
        # Doxygen 1.9 leaves **`x`** as literal stars around the code.
        self.assert_caught("<p>Read **<code>x</code>** first.</p>", "raw-markup", "'**'")

    def test_escaped_tags_shown_as_text(self):
        # What Doxygen writes after a \ref "text whose quote runs onto the next line.
        self.assert_caught('<p>onto the next line" and &lt;strong&gt;bold &lt;tt&gt;x&lt;/tt&gt;&lt;/strong&gt;</p>',
                           "raw-markup", "tag shown as text")

    def test_section_label_shown_as_text(self):
        # "(\\ref design_rules)" written by a tool that took \\r for a line break: "(" and "ef design_rules)".
        self.assert_caught("<p>See (\nef design_rules) for the rules.</p>", "raw-markup", "'design_rules'")
        # A label word in code, in a link's address or in a file name is not prose.
        self.assertEqual([str(f) for f in written_findings(
            '<p><code>design_rules</code>, <a href="other.html#design_rules">rules</a>, design_rules.html.</p>')], [])

    def test_unresolved_snippet(self):
        self.assert_caught('<p>The kernel:</p><div class="fragment"></div><!-- fragment -->',
                           "empty-snippet", "1 empty code fragment")

    def test_machine_paths(self):
        self.assert_caught("<p>Built in /tmp/tmp.x1/build.</p>", "machine-path", "/tmp/")
        self.assert_caught('<div class="fragment"><div class="line">cd /work/main</div></div>', "machine-path", "/work/")
        self.assert_caught('<p><a href="file:///home/me/x.html">x</a></p>', "machine-path", "file:///home/me/x.html")
        self.assert_caught('<p><a href="/root/pagedattn/index.html">x</a></p>', "machine-path", "/root/")

    def test_broken_links(self):
        self.assert_caught('<p><a href="missing.html">x</a></p>', "broken-link", "no such file")
        self.assert_caught('<p><a href="other.html#nosuch">x</a></p>', "broken-link", "no id 'nosuch'")
        self.assert_caught('<p><a href="#nosuch">x</a></p>', "broken-link", "no id 'nosuch'")
        self.assert_caught('<p><img src="pics/missing.svg"/></p>', "broken-link", "no such file")

    def test_reader_pages_are_the_main_page_guides_and_step_pages(self):
        root = Path("/html")
        pages = {root / "index.html": lib.parse(page("", title="pagedattn: pagedattn")),
                 root / "step06_x.html": lib.parse(page("")),
                 root / "md_steps_00_README.html": lib.parse(page("", title="pagedattn: Step 00: the oracle")),
                 root / "debugging.html": lib.parse(page("", title="pagedattn: Debugging with the emulator")),
                 root / "design_style.html": lib.parse(page("", title="pagedattn: Style")),
                 root / "namespacestep06.html": lib.parse(page("", title="pagedattn: Step 06 stuff", page_doc=False))}
        chosen = [path.name for path in lib.reader_pages(root, pages, ["debugging.html", "unbuilt.html"])]
        self.assertEqual(chosen, ["index.html", "debugging.html", "md_steps_00_README.html", "step06_x.html"])

    def test_guide_pages_are_named_by_their_labels(self):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "mainpage.md").write_text("\\mainpage pagedattn\n\n# Not a title {#nope}\n")
            (Path(folder) / "debugging.md").write_text("# Debugging with the emulator {#debugging}\n\n"
                                                       "## Change one rung {#debugging_loop}\n")
            (Path(folder) / "notes.md").write_text("# No label\n")
            self.assertEqual(lib.guide_pages(Path(folder)), ["debugging.html"])


class ScriptTest(unittest.TestCase):
    """The command line: exit codes and what it prints, on a tiny html folder."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="test-check-html."))
        self.html = self.tmp / "html"
        self.html.mkdir()
        (self.html / "index.html").write_text(page(CLEAN_BODY, title="pagedattn: pagedattn"))
        (self.html / "other.html").write_text(page('<h2 id="sec">Sec</h2>', title="pagedattn: Other"))
        # One guide page, written in a stand-in docs/pages and built into the html folder.
        self.guides = self.tmp / "pages"
        self.guides.mkdir()
        (self.guides / "guide.md").write_text("# A guide {#guide}\n")
        (self.html / "guide.html").write_text(page("<p>How to.</p>", title="pagedattn: A guide"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_script(self, *args, env=None):
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                              check=False, env={**os.environ, **(env or {})})

    def stand_in_browser(self):
        """A 'chromium' that prints the file its file:// URL names, as --dump-dom prints the DOM."""
        browser = self.tmp / "fake-chromium"
        browser.write_text(textwrap.dedent("""\
            #!/bin/sh
            for arg; do url="$arg"; done
            cat "${url#file://}"
            """))
        browser.chmod(0o755)
        return str(browser)

    def test_clean_folder_exits_0(self):
        result = self.run_script(str(self.html))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("3 pages: clean", result.stdout)

    def test_findings_exit_1_with_file_rule_and_excerpt(self):
        (self.html / "step06_x.html").write_text(page("<p>The kernel. \\snippet a.cuh body</p>"))
        result = self.run_script(str(self.html))
        self.assertEqual(result.returncode, 1)
        self.assertIn("step06_x.html: raw-markup: Doxygen command '\\snippet' in", result.stdout)
        self.assertIn("The kernel.", result.stdout)

    def test_notebook_pages_are_checked_with_their_own_folder(self):
        notebooks = self.html / "notebooks"
        notebooks.mkdir()
        (notebooks / "ladder.html").write_text(page('<p><a href="../index.html">back</a></p>', page_doc=False))
        result = self.run_script(str(self.html))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("4 pages: clean", result.stdout)
        (notebooks / "ladder.html").write_text(
            page('<script src="file:///usr/share/javascript/requirejs/require.min.js"></script><p>x</p>', page_doc=False))
        result = self.run_script(str(self.html))
        self.assertEqual(result.returncode, 1)
        self.assertIn("notebooks/ladder.html: machine-path: link to a machine path", result.stdout)

    def test_missing_folder_exits_2(self):
        result = self.run_script(str(self.tmp / "nope"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("build the docs first", result.stderr)

    def test_browser_mode_checks_the_rendered_pages(self):
        browser = self.stand_in_browser()
        result = self.run_script("--browser", "--chromium", browser, "--guides", str(self.guides), str(self.html))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        # other.html is neither a guide nor a step page
        self.assertIn("2 pages rendered by fake-chromium (the main page, 1 guide pages, 0 step pages)", result.stdout)
        (self.html / "step06_x.html").write_text(page("<p>Bold **<code>x</code>** here.</p>"))
        (self.html / "guide.html").write_text(page("<p>Read @ref design_rules first.</p>", title="pagedattn: A guide"))
        result = self.run_script("--browser", "--chromium", browser, "--guides", str(self.guides), str(self.html))
        self.assertEqual(result.returncode, 1)
        self.assertIn("step06_x.html (rendered): raw-markup: Markdown bold mark", result.stdout)
        self.assertIn("guide.html (rendered): raw-markup: Doxygen command '@ref'", result.stdout)

    def test_browser_mode_reports_a_guide_page_not_built(self):
        (self.html / "guide.html").unlink()
        result = self.run_script("--browser", "--chromium", self.stand_in_browser(), "--guides", str(self.guides),
                                 str(self.html))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("guide.html: render: a guide page of docs/pages that is not in the html folder", result.stdout)

    def test_browser_mode_with_no_guides_folder_exits_2(self):
        result = self.run_script("--browser", "--chromium", self.stand_in_browser(), "--guides", str(self.tmp / "nope"),
                                 str(self.html))
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("--guides " + str(self.tmp / "nope") + ": no such folder", result.stderr)

    def test_browser_mode_without_a_browser_exits_2(self):
        result = self.run_script("--browser", "--chromium", str(self.tmp / "no-such-browser"), str(self.html))
        self.assertEqual(result.returncode, 2)
        self.assertIn("scripts/setup installs it", result.stderr)

    @unittest.skipUnless(shutil.which("chromium"), "chromium is not installed")
    def test_real_chromium(self):
        (self.html / "step06_x.html").write_text(page("<p>Step six, \\ref oops.</p>" + CLEAN_BODY))
        result = self.run_script("--browser", "--guides", str(self.guides), str(self.html))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("step06_x.html (rendered): raw-markup: Doxygen command '\\ref'", result.stdout)
        self.assertNotIn("index.html", result.stdout)


if __name__ == "__main__":
    unittest.main()
