#!/bin/sh
# Doxygen's input filter for the Markdown pages (FILTER_PATTERNS in docs/Doxyfile.in): drops the
# markers of the numbers that scripts/results writes into prose, `<!-- value:EXPR -->` and
# `<!-- /value -->`, and keeps the number between them. Doxygen 1.9.4 reads an HTML comment
# inside a paragraph as markup: it swallows the space after it and a `%` before it
# ("0.8%<!-- /value --> faster" came out as "0.8faster"). GitHub shows the comments as nothing.
# Lines are kept, so Doxygen's line numbers stay the file's.
exec sed -e 's/<!-- value:[^>]*-->//g' -e 's/<!-- \/value -->//g' "$1"
