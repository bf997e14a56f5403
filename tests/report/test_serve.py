"""The reports server, a real one on 127.0.0.1 at a free port, fetched with urllib: the index at `/` and UTF-8 text."""

import json
import urllib.request

import pytest

from hacrl_exp.report.serve import serve_reports


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A reports folder (README.md, a current and a superseded report) served on a free port; its base URL."""
    tmp_path = tmp_path_factory.mktemp("reports")
    (tmp_path / "README.md").write_text("# Published reports\n\nGSPO×2 against GSPO: Δ +0.037.\n", encoding="utf-8")
    for name in ("grid", "grid_old"):
        (tmp_path / name / "tables").mkdir(parents=True)
        (tmp_path / name / "report.html").write_text("<!doctype html><title>r</title>", encoding="utf-8")
        (tmp_path / name / "report.md").write_text(f"# Report: {name}\n\nHACPO −ω vs GSPO×2: Δ −0.006\n", "utf-8")
        (tmp_path / name / "tables" / "cost.csv").write_text("method,agent\nGSPO×2,opt_char\n", encoding="utf-8")
    (tmp_path / "grid_old" / "superseded.json").write_text(json.dumps({"by": "grid", "reason": "fewer seeds"}))
    server = serve_reports(tmp_path, 0)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str) -> tuple[str, str]:
    """(Content-Type, body decoded with the charset the server named)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        kind = response.headers["Content-Type"]
        return kind, response.read().decode(response.headers.get_content_charset() or "latin-1")


def test_the_index_is_the_rendered_readme_then_the_list_of_reports(served):
    kind, page = fetch(f"{served}/")
    assert kind == "text/html; charset=utf-8"
    assert '<h1 id="published-reports">Published reports</h1>' in page and "GSPO×2 against GSPO: Δ +0.037." in page
    assert '<a href="grid/report.html"><code>grid</code></a> (its numbers: <a href="grid/tables/">tables/</a>)' in page
    assert (
        '<a href="grid_old/report.html"><code>grid_old</code></a> (its numbers: <a href="grid_old/tables/">tables/</a>,'
        ' superseded by <a href="grid/report.html"><code>grid</code></a>)'
    ) in page
    assert fetch(f"{served}/index.html")[1] == page


@pytest.mark.parametrize(
    ("path", "kind", "text"),
    [("grid/report.md", "text/markdown; charset=utf-8", "HACPO −ω vs GSPO×2: Δ −0.006"),
     ("grid/tables/cost.csv", "text/csv; charset=utf-8", "GSPO×2,opt_char"),
     ("README.md", "text/markdown; charset=utf-8", "GSPO×2 against GSPO: Δ +0.037.")],
)  # fmt: skip
def test_markdown_and_csv_are_sent_as_utf8(served, path, kind, text):
    got, body = fetch(f"{served}/{path}")
    assert got == kind and text in body and "Ã" not in body


def test_the_server_listens_on_loopback_only(tmp_path):
    server = serve_reports(tmp_path, 0)
    try:
        assert server.server_address[0] == "127.0.0.1"
        assert "No report here yet" in fetch(f"http://127.0.0.1:{server.server_address[1]}/")[1]
    finally:
        server.shutdown()
        server.server_close()
