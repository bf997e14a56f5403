"""The reports server: a reports folder as static files on 127.0.0.1, with an index page at `/`.

`/` (and `/index.html` when the folder has none) is the folder's README.md rendered (render.to_html) followed by the
list of reports: every <name>/report.html, with a superseded report's successor (layout.read_superseded). Markdown,
CSV and plain text are sent as UTF-8 (`text/markdown; charset=utf-8`, …): without a charset a browser reads them as
Latin-1, and `GSPO×2` shows as `GSPOÃ—2`. Anything else is served as http.server serves it.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from urllib.parse import urlsplit

from hacrl_exp.report.layout import read_superseded
from hacrl_exp.report.render import to_html

HOST = "127.0.0.1"
"""Only this machine: the reports may name private runs and paths."""
UTF8_TYPES = {
    ".md": "text/markdown; charset=utf-8",
    ".csv": "text/csv; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json; charset=utf-8",
}


def index_markdown(folder: Path) -> str:
    """README.md of the folder (if any), then '## Reports': one line per <name>/report.html, linked, with its
    tables/ folder (the CSV files) and, for a superseded report, its successor. (render.to_html turns the README's
    links to a report.md into links to its report.html.)"""
    readme = folder / "README.md"
    lines = [readme.read_text(encoding="utf-8").rstrip(), ""] if readme.is_file() else ["# Reports", ""]
    lines += ["## Reports", ""]
    pages = sorted(folder.glob("*/report.html"))
    for page in pages:
        name = page.parent.name
        superseded = read_superseded(page.parent)
        later = f", superseded by [`{superseded.by}`]({superseded.by}/report.html)" if superseded else ""
        lines.append(f"- [`{name}`]({name}/report.html) (its numbers: [tables/]({name}/tables/){later})")
    if not pages:
        lines.append("No report here yet (`python -m hacrl_exp.report` writes reports/<name>/).")
    return "\n".join(lines) + "\n"


class ReportsHandler(http.server.SimpleHTTPRequestHandler):
    """Static files of the reports folder, UTF-8 for text, the index at `/`, no access log."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **UTF8_TYPES}

    def do_GET(self) -> None:
        if self._is_index():
            body = to_html(index_markdown(Path(self.directory)), "Reports").encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def _is_index(self) -> bool:
        path = urlsplit(self.path).path
        return path == "/" or (path == "/index.html" and not (Path(self.directory) / "index.html").exists())

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


def serve_reports(folder: Path, port: int, host: str = HOST) -> http.server.ThreadingHTTPServer:
    """The reports folder on host:port (port 0: a free one, `server.server_address[1]`), from a daemon thread."""
    handler = functools.partial(ReportsHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
