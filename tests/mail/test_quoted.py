"""Quoted copies (``mail.quoted``): runs of quoted copy lines go, everything else stays."""

from __future__ import annotations

from workflow.mail.quoted import copy_lines, without_copies

COPY = copy_lines(["# CSV export\n\nExport the report as CSV.\n- one row per line\n"])


def test_a_quoted_copy_becomes_one_line() -> None:
    text = "Looks fine.\n\n> Please review.\n>\n> # CSV export\n>\n> Export the report as CSV.\n> - one row per line\n"
    out = without_copies(text, COPY)
    assert out.splitlines() == [
        "Looks fine.",
        "",
        "> Please review.",
        ">",
        "[3 quoted line(s) of the artifact's copy left out: read the artifact from the tree]",
    ]


def test_nested_quotes_and_interleaved_comments() -> None:
    text = ">> # CSV export\n>> Export the report as CSV.\nThis line is wrong.\n> - one row per line\nAnd this."
    out = without_copies(text, COPY).splitlines()
    assert out[1] == "This line is wrong." and out[3] == "And this."
    assert "Export the report" not in "\n".join(out)


def test_the_persons_own_lines_that_repeat_the_copy_stay() -> None:
    text = "Export the report as CSV.\n> something else\n>\n"
    assert without_copies(text, COPY) == text  # not quoted: their words; quoted, not the copy: kept


def test_nothing_to_leave_out() -> None:
    assert without_copies("> a\n> b", frozenset()) == "> a\n> b"
    assert without_copies("plain", COPY) == "plain"
