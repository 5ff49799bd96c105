"""The cockpit's thread page shows the artifact a review-request carries, rendered as Markdown
safely (a hostile artifact's <script>, javascript: links and images stay text), and the diff
against the last reviewed version; only to those who may read the thread."""

from __future__ import annotations

import re
from urllib.parse import quote

from helpers.project import Project
from helpers.web import BOB, BOB_PASSWORD, Client, Server

HOSTILE = """# Billing

Pay **monthly**. See [the rules](https://example.org/rules) and [notes](../todo/notes.md).

<script>alert("pwned")</script>
<img src=x onerror="alert(2)">

[click me](javascript:alert(3)) [or me](JaVaScRiPt:alert(4)) [data](data:text/html,<b>x</b>)
![tracker](http://tracker.example/pixel.png)
"""


def test_the_thread_page_renders_the_artifact_safely_and_its_diff(project: Project, server: Server) -> None:
    spec = project.dir / "specs" / "proposed" / "billing.md"
    spec.write_text("# Billing\n\nPay yearly.\n")
    project.send("spec-writer", "review-request", "specs/proposed/billing.md", "spec-reviewer")
    spec.write_text(HOSTILE)
    mid = project.send("spec-writer", "review-request", "specs/proposed/billing.md", "spec-reviewer")
    bob = Client(server.url)
    assert bob.login(BOB, BOB_PASSWORD) == 303
    status, page = bob.get("/thread?id=" + quote(mid, safe=""))
    assert status == 200
    assert "<h1>Billing</h1>" in page and "<strong>monthly</strong>" in page
    assert '<a href="https://example.org/rules">the rules</a>' in page and 'href="../todo/notes.md"' in page
    # nothing of the artifact's own markup: no script, no handler, no javascript:/data: link, no image
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "<img" not in page and 'src="http://tracker.example' not in page
    assert not re.search(r'href="\s*(javascript|data):', page, re.IGNORECASE)
    assert 'onerror="alert' not in page
    # the diff against the last reviewed version
    assert "-Pay yearly." in page and "+Pay **monthly**." in page and 'class="diff"' in page
    # another role's viewer is refused the thread, copy and all
    other = Client(server.url)
    assert other.login("tester", "tester-password") == 303
    status, page = other.get("/thread?id=" + quote(mid, safe=""))
    assert "Pay **monthly**" not in page and "monthly" not in page
