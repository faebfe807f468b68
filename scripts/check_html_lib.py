"""What the reader sees: rules over Doxygen's HTML, used by scripts/check_html.

One parser (`parse`) turns a page, as Doxygen wrote it or as a browser rendered it, into a `Page`:
its visible prose (text outside code, scripts and styles), the text of its code, its links, the
ids it defines and its empty code fragments. `check_page` runs every rule over one `Page`:

  raw-markup        Doxygen or Markdown markup left as prose: @section, \\snippet, @ref, \\ref,
                    @code, \\code (and their kin), a literal **, a tag shown as text (<tt>, <strong>),
                    a section label of the site shown as a word (a \\ref that lost its command, as
                    "(\\ref x_y)" does when a tool writes \\r as a line break: "(" then "ef x_y)")
  empty-snippet     a code fragment with nothing in it: Doxygen's mark of a \\snippet whose file or
                    tag it did not find (it warns, but a page can still be built that way)
  machine-path      a build machine's absolute path (/tmp/, /work/, /home/, /root/, file:) in prose,
                    in code or in a link
  broken-link       a local link to a file that is not in the html folder, or to a #fragment that
                    the target page does not define
  render            (rendered pages only) the browser shows less than half the page's prose

Standard library only.
"""

import posixpath
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Doxygen commands that must never reach the reader. `\n` style escapes and `@` in prose (e-mail,
# "@ 4.8 TB/s") are not commands, so the list names the commands the pages use.
COMMANDS = ("section", "subsection", "subsubsection", "snippet", "snippetdoc", "include", "ref",
            "code", "endcode", "verbatim", "endverbatim", "copydoc", "brief", "param", "tparam",
            "return", "returns", "note", "see", "page", "subpage", "anchor", "mainpage", "if",
            "endif", "dot", "enddot", "image", "li", "p", "c", "b", "e", "em", "details")
RAW_COMMAND = re.compile(r"(?<![\w\\@])[@\\](?:" + "|".join(COMMANDS) + r")\b(?![-.]\w)")
BOLD_MARK = re.compile(r"\*\*")
# A tag the reader sees as text: an escaped <tt>, <strong>, </a>, <br/> ...
TAG_AS_TEXT = re.compile(
    r"</?(?:tt|strong|b|i|em|code|pre|a|p|br|div|span|table|tr|td|th|ul|ol|li|h[1-6]|img|sup|sub|kbd)"
    r"(?:\s[^<>]*)?/?>", re.IGNORECASE)
# A section label (`{#design_correctness_rules}`, Doxygen's <a class="anchor" id=...>) has an
# underscore; member anchors (a3f2...) have none. A word of prose that is one is a lost \ref.
LABEL = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
LABEL_WORD = re.compile(r"(?<![\w/.#-])" + LABEL.pattern + r"(?![\w/-]|\.\w)")
MACHINE_PATH = re.compile(r"(?<![\w.~$}-])(?:/tmp/|/var/tmp/|/work/|/home/|/root/|/Users/|file:/)")

# Elements whose content is code (rules for prose do not apply there).
CODE_TAGS = {"code", "pre", "tt", "kbd", "samp"}
# Doxygen writes declarations (`char **argv`) in table cells of these classes, not in <code>.
CODE_CLASSES = {"fragment", "memItemLeft", "memItemRight", "memTemplItemLeft", "memTemplItemRight",
                "memTemplParams", "memname", "memproto", "paramtype", "paramname", "params"}
# Elements whose content the reader never sees as text.
HIDDEN_TAGS = {"script", "style", "noscript", "template", "head", "title"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
             "source", "track", "wbr"}
LINK_ATTRIBUTES = {("a", "href"), ("area", "href"), ("link", "href"), ("img", "src"), ("script", "src"),
                   ("iframe", "src"), ("object", "data"), ("embed", "src"), ("source", "src")}


@dataclass
class Finding:
    path: str
    rule: str
    excerpt: str

    def __str__(self):
        return f"{self.path}: {self.rule}: {self.excerpt}"


@dataclass
class Page:
    prose: str = ""   # visible text outside code
    code: str = ""    # text inside code elements
    links: list = field(default_factory=list)  # (tag, attribute, url, inside Doxygen's summary bar)
    ids: set = field(default_factory=set)
    labels: set = field(default_factory=set)  # section labels it defines (a.anchor ids like x_y)
    empty_fragments: int = 0
    title: str = ""
    page_doc: bool = False  # a page Doxygen made from a Markdown page (<!-- PageDoc -->)


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.prose = []
        self.code = []
        self.title = []
        self.stack = []  # (tag, kind, fragment) with kind in {"", "code", "hidden"}
        self.fragments = []  # per open div.fragment: [text seen]
        self.summary = 0  # inside Doxygen's summary bar ("Classes | Public Member Functions")

    def _kind(self):
        for _, kind, _, _ in reversed(self.stack):
            if kind:
                return kind
        return ""

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attributes.get(key):
                self.page.ids.add(attributes[key])
        anchor = attributes.get("id") or ""
        if tag == "a" and "anchor" in (attributes.get("class") or "").split() and LABEL.fullmatch(anchor):
            self.page.labels.add(anchor)
        for (link_tag, attribute) in LINK_ATTRIBUTES:
            if tag == link_tag and attributes.get(attribute) is not None:
                self.page.links.append((tag, attribute, attributes[attribute], self.summary > 0))
        classes = set((attributes.get("class") or "").split())
        self.summary += "summary" in classes
        if tag in VOID_TAGS:
            if tag == "br":
                self._text("\n")
            return
        kind = ""
        if tag in HIDDEN_TAGS and tag != "title":
            kind = "hidden"
        elif tag in CODE_TAGS or classes & CODE_CLASSES:
            kind = "code"
        if kind == "code" and self._kind() != "code":
            self.prose.append("`…`")  # the prose keeps a mark where code was, for the excerpts
        fragment = "fragment" in classes
        if fragment:
            self.fragments.append([])
        self.stack.append((tag, kind, fragment, "summary" in classes))
        if tag in ("p", "div", "tr", "li", "h1", "h2", "h3", "h4", "table", "td", "th"):
            self._text("\n" if tag != "td" and tag != "th" else " ")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in VOID_TAGS:
            return
        if not any(entry[0] == tag for entry in self.stack):
            return  # a stray end tag
        while self.stack:
            open_tag, _, fragment, summary = self.stack.pop()
            self.summary -= summary
            if fragment:
                seen = self.fragments.pop()
                if not "".join(seen).strip():
                    self.page.empty_fragments += 1
            if open_tag == tag:
                break
        if tag in ("p", "div", "tr", "li", "h1", "h2", "h3", "h4"):
            self._text("\n")

    def _text(self, data):
        kind = self._kind()
        if kind == "hidden":
            return
        for seen in self.fragments:
            seen.append(data)
        (self.code if kind == "code" else self.prose).append(data)

    def handle_comment(self, data):
        if data.strip() == "PageDoc":  # Doxygen closes a Markdown page's body with </div><!-- PageDoc -->
            self.page.page_doc = True

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "title":
            self.title.append(data)
            return
        self._text(data)

    def close(self):
        super().close()
        while self.stack:  # unclosed elements at the end of the document
            self.handle_endtag(self.stack[-1][0])
        self.page.prose = "".join(self.prose)
        self.page.code = "".join(self.code)
        self.page.title = " ".join("".join(self.title).split())
        return self.page


def parse(html: str) -> Page:
    parser = _Parser()
    parser.feed(html)
    return parser.close()


def _excerpt(text: str, start: int, end: int, width: int = 40) -> str:
    piece = text[max(0, start - width):end + width]
    return "'" + " ".join(piece.split()) + "'"


def _text_findings(path, text, pattern, rule, what):
    findings = []
    for match in pattern.finditer(text):
        findings.append(Finding(path, rule, f"{what} '{match.group(0)}' in {_excerpt(text, match.start(), match.end())}"))
    return findings


def check_text(path: str, page: Page) -> list:
    """The rules over what the reader reads: raw markup, empty snippets, machine paths."""
    findings = []
    findings += _text_findings(path, page.prose, RAW_COMMAND, "raw-markup", "Doxygen command")
    findings += _text_findings(path, page.prose, BOLD_MARK, "raw-markup", "Markdown bold mark")
    findings += _text_findings(path, page.prose, TAG_AS_TEXT, "raw-markup", "tag shown as text")
    if page.empty_fragments:
        findings.append(Finding(path, "empty-snippet",
                                f"{page.empty_fragments} empty code fragment(s): a \\snippet that did not resolve"))
    findings += _text_findings(path, page.prose, MACHINE_PATH, "machine-path", "path")
    findings += _text_findings(path, page.code, MACHINE_PATH, "machine-path", "path in code")
    return findings


class Site:
    """The html folder: answers whether a local link lands on a file and, for #fragments, an id."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.files = {path.relative_to(self.root).as_posix() for path in self.root.rglob("*") if path.is_file()}
        self._ids = {}
        self.labels = set()  # the section labels of every page remembered

    def ids(self, name: str) -> set:
        if name not in self._ids:
            text = (self.root / name).read_text(encoding="utf-8", errors="replace")
            self._ids[name] = parse(text).ids
        return self._ids[name]

    def remember(self, name: str, page: Page):
        self._ids[name] = page.ids
        self.labels |= page.labels


def check_labels(path: str, page: Page, site: Site) -> list:
    """A section label of the site read as a word of prose: a \\ref whose command was lost."""
    return [Finding(path, "raw-markup", f"section label shown as text (a lost \\ref?) '{match.group(0)}' in "
                                        f"{_excerpt(page.prose, match.start(), match.end())}")
            for match in LABEL_WORD.finditer(page.prose) if match.group(0) in site.labels]


def check_links(path: str, page: Page, page_name: str, site: Site) -> list:
    """Local links of `page`, which lies at `page_name` (relative to the html folder)."""
    findings = []
    base = posixpath.dirname(page_name)
    for tag, attribute, url, in_summary in page.links:
        url = url.strip()
        parts = urlsplit(url)
        where = f"<{tag} {attribute}={url!r}>"
        if parts.scheme == "file" or MACHINE_PATH.match(parts.path or ""):
            findings.append(Finding(path, "machine-path", f"link to a machine path: {where}"))
            continue
        if parts.scheme or parts.netloc or url.startswith("#!"):
            continue  # http(s), mailto, javascript: not ours to check
        if parts.path.startswith("/"):
            findings.append(Finding(path, "broken-link", f"absolute local path: {where}"))
            continue
        target = posixpath.normpath(posixpath.join(base, unquote(parts.path))) if parts.path else page_name
        if target not in site.files:
            findings.append(Finding(path, "broken-link", f"no such file: {where}"))
            continue
        if parts.fragment and target.endswith(".html") and unquote(parts.fragment) not in site.ids(target):
            if in_summary and parts.fragment == "nested-classes":
                # Doxygen 1.9 lists a class's private nested classes in its summary bar but writes
                # no section for them (pa::PagedKVCache::Sequence): Doxygen's link, not ours.
                continue
            findings.append(Finding(path, "broken-link", f"no id {parts.fragment!r} in {target}: {where}"))
    return findings


def check_rendered_whole(path: str, written: Page, rendered: Page) -> list:
    """A browser that showed an error page, or lost most of the text, has checked nothing."""
    have, want = len(" ".join(rendered.prose.split())), len(" ".join(written.prose.split()))
    if have < want // 2:
        return [Finding(path, "render", f"the browser shows {have} characters of prose, the page has {want}")]
    return []


def check_page(path: str, page: Page, page_name: str, site: Site) -> list:
    return check_text(path, page) + check_labels(path, page, site) + check_links(path, page, page_name, site)


def html_files(root: Path) -> list:
    """The pages of a Doxygen html folder: its top-level *.html (search/ holds only Doxygen's own)
    and the executed notebooks in notebooks/ (scripts/test writes them there)."""
    return sorted(root.glob("*.html")) + sorted(root.glob("notebooks/*.html"))


STEP_TITLE = re.compile(r"^Step \d+\b")


GUIDE_TITLE = re.compile(r"#\s.*\{#(\w+)\}\s*")


def guide_pages(pages_dir: Path) -> list:
    """The html names of the guide pages written in `pages_dir` (docs/pages): `debugging.md`, whose
    first line is a title ending in {#debugging}, is debugging.html. The main page (its first line
    is \\mainpage) is index.html, not a guide."""
    names = []
    for markdown in sorted(pages_dir.glob("*.md")):
        lines = markdown.read_text(encoding="utf-8").splitlines()
        title = GUIDE_TITLE.fullmatch(lines[0]) if lines else None
        if title:
            names.append(f"{title.group(1)}.html")
    return names


def reader_pages(root: Path, pages: dict, guides=()) -> list:
    """The pages a learner opens first, which a browser renders: the main page, the guide pages
    named in `guides` (html names; those not in `pages` are left out: the caller reports them) and
    every step page."""
    chosen = [root / "index.html"] + [root / name for name in guides if root / name in pages]
    for html, page in sorted(pages.items()):
        title = page.title.split(":", 1)[-1].strip() if ":" in page.title else page.title
        if page.page_doc and STEP_TITLE.match(title) and html not in chosen:
            chosen.append(html)
    return chosen
