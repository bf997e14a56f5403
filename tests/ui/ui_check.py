"""Look at a store's runs the way a researcher does on a first visit: start `python -m hacrl_exp.ui` on it, open the
links it prints in headless Chromium at 1440×900 (each in a fresh profile, the panels as a first visit leaves them:
MLflow's Assistant panel open, the shared-view banner shown), check what a person sees, and save PNGs.

    python -m tests.ui.ui_check --store sqlite:////tmp/ui/mlflow.db --out /tmp/ui/shots [--reports reports]
    pytest tests/ui        # the same on a store of two tiny jobs and a report built from it (tests/ui/test_ui_check.py)

Checks, on what is drawn (the characters of a cell or legend entry a reader sees: clipped by their boxes and the
viewport, cut before an ellipsis, not covered), without scrolling unless said (exit status 1 when any fails, each
problem one `ERROR` line on stderr):
- every printed MLflow link opens in "Model training" mode, and no page shows mojibake (`Ã`, `Î`, `â€`);
- final accuracy: on the first screen, every job's row shows a name that tells it apart, its method and seed, and
  every agent's start → final (tag gain/<agent>, headed by the agent) whole, the final as the MLflow API has it;
- compare methods: the visible legend of the expanded eval/accuracy/mean chart names each agent run of the setting,
  and its lines are drawn in the colours of their methods (hacrl_exp.tracking.views.method_colour);
- compare configurations: agent runs grouped by agent and config, no "(none)" group, the store's (agent, config) pairs;
- models: each model's visible name starts with its agent (`<agent>@<job>`), and (scrolled to) shows its run's
  last-step eval/accuracy/mean in a column of the held-out dataset it was measured on;
- a parent run's description (below its tags, as MLflow lays the page out) opens on each agent's start → final;
  the agent run's Artifacts tab lists model.md, and its model's page lists the held-out set under "Datasets used";
- each printed report: its first screen shows, per agent of the store, the bottom line's sentence saying which method
  ended (or which tied) highest; no image is broken, and its report.md reads as UTF-8 (no mojibake);
- no page shows an error text and the server answers no request with 5xx.
Needs playwright (the `dev` and `ui` extras) and a Chromium binary (Debian's `chromium`; `.ci/run` installs it).
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
ERROR_TEXTS = ("Something went wrong", "Internal Server Error", "RESOURCE_DOES_NOT_EXIST", "Page not found")
MOJIBAKE = ("Ã", "Î", "â€", "Â")
"""UTF-8 read as Latin-1: how `×`, `Δ`, `—` and a no-break space look when a page comes without its charset."""
CARD = '[data-testid="experiment-view-compare-runs-card"]'
VISIBLE_TEXT = """el => {
    // the characters of el a reader sees: each clipped by its element's and their ancestors' overflow and by the
    // viewport, cut before a text-overflow ellipsis; none when el is hidden or another element covers its start
    const clip = node => {
        let [l, t, r, b] = [0, 0, innerWidth, innerHeight];
        for (let a = node; a; a = a.parentElement) {
            const s = getComputedStyle(a), c = a.getBoundingClientRect();
            if (s.visibility === 'hidden' || s.opacity === '0' || s.display === 'none') return null;
            const cut = s.overflowX !== 'visible' || s.clip !== 'auto' || s.clipPath !== 'none';
            if (cut) { l = Math.max(l, c.left); r = Math.min(r, c.right); }
            if (s.overflowY !== 'visible' || s.clip !== 'auto' || s.clipPath !== 'none') {
                t = Math.max(t, c.top); b = Math.min(b, c.bottom);
            }
        }
        return r - l >= 2 && b - t >= 2 ? [l, t, r, b] : null;
    };
    const box = clip(el);
    if (!box) return '';
    const hit = document.elementFromPoint(box[0] + Math.min(8, (box[2] - box[0]) / 2), (box[1] + box[3]) / 2);
    if (!hit || !(el.contains(hit) || hit.contains(el))) return '';
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), range = document.createRange();
    let out = '';
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const parent = n.parentElement, area = clip(parent);
        if (!area) continue;
        const [l, t, r, b] = area;
        let limit = r + 0.5;
        for (let a = parent; a && a !== el.parentElement; a = a.parentElement) {
            if (getComputedStyle(a).textOverflow === 'ellipsis' && a.scrollWidth > a.clientWidth + 1) {
                limit = Math.min(limit, a.getBoundingClientRect().right - 12);
            }
        }
        for (let i = 0; i < n.length; i++) {
            range.setStart(n, i); range.setEnd(n, i + 1);
            const c = range.getBoundingClientRect();
            if (!c.width && !c.height) continue;
            if (c.right > limit || c.left < l - 0.5 || c.top < t - 0.5 || c.bottom > b + 0.5) return out + '…';
            out += n.data[i];
        }
    }
    return out;
}"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_ui(store: str, reports: Path | None, log_path: Path) -> tuple[subprocess.Popen, list[str]]:
    """`python -m hacrl_exp.ui` on free ports; its printed lines once the servers answer (240 s at most)."""
    port, reports_port = free_port(), free_port()
    command = [sys.executable, "-m", "hacrl_exp.ui", "--store", store, "--port", str(port)]
    command += ["--reports-port", str(reports_port)] + (["--reports", str(reports)] if reports else [])
    ui = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log_path.open("w"), text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in ui.stdout], daemon=True).start()
    printed, deadline = [], time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            printed.append(lines.get(timeout=1))
        except queue.Empty:
            if ui.poll() is not None:
                raise SystemExit(f"python -m hacrl_exp.ui exited with {ui.returncode}; see {log_path}") from None
            continue
        if printed[-1].startswith("Ctrl-C"):
            return ui, printed
    ui.send_signal(signal.SIGTERM)
    raise SystemExit(f"python -m hacrl_exp.ui printed no links in 240 s; see {log_path}")


def parse_links(lines: list[str]) -> dict[str, dict[str, str]]:
    """{section: {label: url}} of the printed lines; sections: 'mlflow', each experiment's name, 'reports'."""
    out: dict[str, dict[str, str]] = {}
    section = "mlflow"
    for line in lines:
        link = re.fullmatch(r"\s+([\w ,+.-]+): (http\S+)", line)
        heading = re.fullmatch(r"  (\S.*) \(\d+ jobs?\)", line)
        if line.startswith("Reports at"):
            section = "reports"
        elif heading:
            section = heading.group(1)
        elif link:
            out.setdefault(section, {})[link.group(1)] = link.group(2)
    return out


def pick_job(store: str, experiment: str | None) -> dict:
    """The newest finished job whose agents share rollouts (they log cross/omega), else the newest finished job: its
    experiment, parent and agent runs; and of its experiment: the (agent, config) groups, each job's final accuracies
    and tags, and the agent runs of the setting the "Compare methods" view shows."""
    from mlflow.tracking import MlflowClient

    try:
        from hacrl_exp.tracking.views import view_setting
    except ImportError:  # the code before issue 39 (the check is run on it to show what it fails): no setting

        def view_setting(tags) -> None:
            return None

    client = MlflowClient(store)
    experiments = [client.get_experiment_by_name(experiment)] if experiment else client.search_experiments()
    found = []
    for exp in experiments:
        parents = client.search_runs([exp.experiment_id], "tags.role = 'parent' and attributes.status = 'FINISHED'",
                                     order_by=["start_time DESC"])  # fmt: skip
        for parent in parents:
            agents = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
            if agents:
                sharing = any("cross/omega" in a.data.metrics for a in agents)
                found.append((not sharing, -parent.info.start_time, exp, parent, agents))
    if not found:
        raise SystemExit(f"no finished training job (a role=parent run with agent runs) in {store}")
    _, _, exp, parent, agents = min(found, key=lambda f: f[:2])
    exp = client.get_experiment(exp.experiment_id)  # its tags as the UI reads them (the views ui.py wrote)
    all_agents = client.search_runs([exp.experiment_id], "tags.role = 'agent'", max_results=50_000)
    setting = view_setting(exp.tags)
    jobs = {}
    for job in client.search_runs([exp.experiment_id], "tags.role = 'parent'", max_results=50_000):
        finals = {k: v for k, v in job.data.metrics.items() if k.startswith("final/accuracy_mean/")}
        jobs[job.info.run_name] = {
            "finals": finals,
            "method": job.data.tags.get("method"),
            "seed": job.data.tags.get("seed"),
        }
    return {
        "experiment": exp,
        "parent": parent,
        "agents": agents,
        "groups": {(r.data.tags.get("agent"), r.data.tags.get("config")) for r in all_agents},
        "jobs": jobs,
        "setting_runs": [r for r in all_agents if setting is None or r.data.tags.get("setting") == setting],
        "last": {a.data.tags["agent"]: last_step_metrics(client, a.info.run_id) for a in agents},
        "model": first_model(client, exp.experiment_id, agents[0]),
    }


def first_model(client, experiment_id: str, run) -> tuple[str, str] | None:
    """(model id, held-out dataset name) of the agent run's first logged model; None when it logged none."""
    models = client.search_logged_models([experiment_id], filter_string=f"source_run_id = '{run.info.run_id}'")
    held_out = [i.dataset.name for i in run.inputs.dataset_inputs
                if {t.key: t.value for t in i.tags}.get("mlflow.data.context") == "eval"]  # fmt: skip
    return (models[0].model_id, held_out[0]) if models and held_out else None


def last_step_metrics(client, run_id: str) -> dict[str, float]:
    """A run's metrics at its last step (what its final model must carry)."""
    history = {k: client.get_metric_history(run_id, k) for k in client.get_run(run_id).data.metrics}
    last = max(m.step for points in history.values() for m in points)
    return {k: m.value for k, points in history.items() for m in points if m.step == last}


class Browser:
    """Headless Chromium; `page()` opens a fresh profile (a first visit: no localStorage, cookies or IndexedDB, so
    no remembered UI mode or panel), every 5xx answer is recorded. Only the HTTP and compiled-code caches of the
    previous profile are copied in: what a browser caches is never what a page shows, and MLflow's 10 MB of
    JavaScript then loads in seconds, not tens of seconds, on a loaded 2-core machine."""

    CACHES = ("Default/Cache", "Default/Code Cache")

    def __init__(self, playwright, chromium: str, width: int, height: int) -> None:
        self.playwright, self.chromium, self.viewport = playwright, chromium, {"width": width, "height": height}
        self.contexts, self.failed, self.profiles = [], [], []

    def page(self):
        profile = tempfile.mkdtemp(prefix="ui_check_")
        if self.contexts:  # closed first, so that its caches are whole on disk
            self.contexts[-1].close()
            for cache in self.CACHES:
                if (Path(self.profiles[-1]) / cache).is_dir():
                    shutil.copytree(Path(self.profiles[-1]) / cache, Path(profile) / cache)
        self.profiles.append(profile)
        context = self.playwright.chromium.launch_persistent_context(
            profile, executable_path=self.chromium, args=CHROMIUM_FLAGS, viewport=self.viewport
        )
        self.contexts.append(context)
        page = context.new_page()
        page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 500 else None)
        return page

    def close(self) -> None:
        for context in self.contexts:
            context.close()  # closing a closed context does nothing
        for profile in self.profiles:
            shutil.rmtree(profile, ignore_errors=True)


def land(page, url: str, wait_for: str, settle_s: float = 1.5) -> list[str]:
    """Open url and wait for `wait_for`, leaving the panels as a first visit opens them; the problems seen."""
    page.goto(url, wait_until="load")  # the UI polls running runs: "networkidle" may never come
    try:
        page.wait_for_selector(wait_for, timeout=60_000)
    except Exception:  # noqa: BLE001 - reported; the screenshot shows what rendered instead
        return [f"nothing matching {wait_for!r} rendered in 60 s"]
    time.sleep(settle_s)
    return page_errors(page)


def page_errors(page) -> list[str]:
    body = page.inner_text("body")
    problems = [f"the page shows {text!r}" for text in ERROR_TEXTS if text in body]
    return problems + [f"the page shows mojibake {m!r}: {mojibake_context(body, m)!r}" for m in MOJIBAKE if m in body]


def mojibake_context(text: str, mark: str) -> str:
    at = text.index(mark)
    return text[max(0, at - 30) : at + 30]


def model_training_mode(page) -> list[str]:
    """[] when the mode switch shows "Model training" selected (the darker of the two labels)."""
    darkness = page.evaluate(
        """labels => labels.map(text => {
            const span = [...document.querySelectorAll('span')].find(s => s.textContent.trim() === text);
            if (!span) return null;
            const [r, g, b] = getComputedStyle(span).color.match(/\\d+/g).map(Number);
            return 765 - r - g - b;
        })""",
        ["Model training", "GenAI"],
    )
    if None in darkness:
        return ["the GenAI / Model training switch is missing"]
    return [] if darkness[0] > darkness[1] else ["it opened in GenAI mode, not Model training"]


def visible_texts(page, selector: str) -> list[str]:
    return [page.locator(selector).nth(i).evaluate(VISIBLE_TEXT) for i in range(page.locator(selector).count())]


ROWS = ".ag-center-cols-container .ag-row, .ag-pinned-left-cols-container .ag-row"


def table_cells(page, columns: list[str]) -> list[tuple[str, dict[str, str]]]:
    """(row index, {column: visible text}) per drawn grid row and part (pinned, centre), for the `columns` (header
    col-id) drawn now; cells are found by the header's aria-colindex (a cell's col-id is HTML-escaped again)."""
    return page.evaluate(
        f"""columns => {{
            const headers = [...document.querySelectorAll('.ag-header-cell')];
            const index = columns.map(c => [c, headers.find(h => h.getAttribute('col-id') === c)])
                .filter(([, h]) => h).map(([c, h]) => [c, h.getAttribute('aria-colindex')]);
            return [...document.querySelectorAll('{ROWS}')].map(row => [row.getAttribute('row-index'),
                Object.fromEntries(index.map(([c, i]) => [c, row.querySelector(`[aria-colindex="${{i}}"]`)])
                    .filter(([, cell]) => cell).map(([c, cell]) => [c, ({VISIBLE_TEXT})(cell)]))]);
        }}""",
        columns,
    )


def merged_rows(page, columns: list[str]) -> list[dict[str, str]]:
    rows: dict[str, dict[str, str]] = {}
    for index, cells in table_cells(page, columns):
        rows.setdefault(index, {}).update(cells)
    return list(rows.values())


def number(text: str | None) -> float | None:
    """The number a cell shows whole; None for a cut (`…`) or empty cell."""
    try:
        return float(text) if text and "…" not in text else None
    except ValueError:
        return None


NAME = "attributes.`Run Name`"


def check_final_view(page, url: str, job: dict, out: Path) -> list[str]:
    """On the first screen, every job's row: a name that tells it from the others, its method and seed, and each
    agent's start → final accuracy whole (`gain/<agent>`, its header naming the agent), the final as the API has it."""
    problems = land(page, url, ".ag-row") + model_training_mode(page)
    agents = [a.data.tags["agent"] for a in job["agents"]]
    gains = [f"tags.`gain/{a}`" for a in agents]
    page.screenshot(path=str(out / "runs_table.png"))
    headers = visible_texts(page, ".ag-header-cell")
    problems += [
        f"no visible column header names {a} (headers: {headers})" for a in agents if f"gain/{a}" not in headers
    ]
    rows = [r for r in merged_rows(page, [NAME, "tags.`method`", "tags.`seed`", *gains]) if r.get(NAME)]
    if len(rows) != len(job["jobs"]):
        problems.append(f"{len(rows)} job rows drawn on the first screen, not {len(job['jobs'])}")
    for row in rows:
        shown = row[NAME].rstrip("…")
        names = [n for n in job["jobs"] if n.startswith(shown)]
        if len(names) != 1:
            problems.append(f"run name {row[NAME]!r} does not tell one job ({names})")
            continue
        expected = job["jobs"][names[0]]
        for tag in ("method", "seed"):
            if row.get(f"tags.`{tag}`") != expected[tag]:
                problems.append(
                    f"{names[0]}: the {tag} column shows {row.get(f'tags.`{tag}`')!r}, not {expected[tag]!r}"
                )
        for agent, column in zip(agents, gains):
            final = expected["finals"].get(f"final/accuracy_mean/{agent}")
            text = row.get(column) or ""
            value = number(text.split("→")[-1].strip()) if "→" in text else None
            if final is not None and (value is None or abs(value - final) > 5e-4):
                problems.append(f"{names[0]}: {agent}'s start → final shows {text!r}, not a final of {final}")
    return problems


def check_methods_view(page, url: str, job: dict, out: Path) -> list[str]:
    """The expanded eval/accuracy/mean chart: a visible legend entry per agent run of the setting, and each run's
    line in its method's colour."""
    from hacrl_exp.tracking.views import method_colour

    problems = land(page, url, CARD) + model_training_mode(page)
    page.screenshot(path=str(out / "methods.png"))
    runs = job["setting_runs"]
    problems += expanded_legend(page, "eval/accuracy/mean", [f"{r.info.run_name} (" for r in runs])
    drawn = set(page.locator('[role="dialog"] .js-plotly-plot .scatterlayer path.js-line').evaluate_all(
        "paths => paths.map(p => getComputedStyle(p).stroke)"))  # fmt: skip
    wanted = {rgb(method_colour(r.data.tags["method"])) for r in runs}
    if drawn != wanted:
        problems.append(f"the lines are drawn in {sorted(drawn)}, not the methods' colours {sorted(wanted)}")
    page.screenshot(path=str(out / "methods_chart.png"))
    return problems


def rgb(colour: str) -> str:
    """'#d62728' as the browser's computed style writes it: 'rgb(214, 39, 40)'."""
    return "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))


def check_compare_view(page, url: str, job: dict, out: Path) -> list[str]:
    problems = land(page, url, CARD) + model_training_mode(page)
    page.screenshot(path=str(out / "compare.png"))
    labels = [t for t in page.locator("span[title]").evaluate_all("els => els.map(e => e.title)") if "agent:" in t]
    seen = {tuple(re.fullmatch(r"agent: (.*), config: (.*)", t).groups()) for t in labels if "config:" in t}
    problems += [f"an empty group is listed: {t!r}" for t in labels if "(none)" in t]
    if seen != job["groups"]:
        problems.append(f"groups shown {sorted(seen)} differ from the store's (agent, config) {sorted(job['groups'])}")
    return problems


def expanded_legend(page, metric: str, names: list[str]) -> list[str]:
    """Expand the chart of `metric` and check that each of `names` starts the visible text of a legend entry."""
    card = page.locator(CARD, has=page.locator(f'h4[title="{metric}"]')).first
    if not card.count():
        return [f"no {metric} chart"]
    card.locator('[data-component-id="fullscreen_button_chartcard"]').click()
    page.wait_for_selector('[role="dialog"] .js-plotly-plot', timeout=30_000)
    time.sleep(2)
    texts = [t for t in visible_texts(page, '[role="dialog"] span') if t.endswith(f"({metric})") or "…" in t]
    missing = [n for n in names if not any(t.startswith(n) for t in texts)]
    return [f"the visible legend of {metric} lacks {missing} (it shows {texts})"] if missing else []


SCROLL_RIGHT = "() => { document.querySelector('.ag-body-horizontal-scroll-viewport').scrollLeft += 300 }"


def check_models(page, url: str, job: dict, out: Path) -> list[str]:
    """Each model's visible name starts with its agent; scrolled to it, its eval/accuracy/mean is its run's last
    step's."""
    from hacrl_exp.tracking.names import model_name

    problems = land(page, url, ".ag-row") + model_training_mode(page)
    page.screenshot(path=str(out / "models.png"))
    names = [n for n in (r.get("name") for r in merged_rows(page, ["name"])) if n]
    if not names:
        problems.append("the Models page shows no model name")
    for name in names:
        if not re.match(r"[\w+-]+@", name):
            problems.append(f"model name {name!r}: no agent at its start (agent@job)")
    job_name = job["parent"].info.run_name
    agents_seen = {n.split("@")[0] for n in names}
    problems += [f"no visible model name starts with {a}@" for a in job["last"] if a not in agents_seen]
    # the held-out metrics are linked with their dataset: MLflow's column id then names it too (metricKey first)
    key = '"metricKey":"eval/accuracy/mean"'
    scroll_to(page, key, match="*=")
    columns = page.evaluate(
        "key => [...document.querySelectorAll('.ag-header-cell')].map(h => h.getAttribute('col-id'))"
        ".filter(c => c && c.includes(key))",
        key,
    )
    if not any("dataset" in c.lower() for c in columns):
        problems.append(f"the Models page has no eval/accuracy/mean column of a dataset (columns: {columns})")
    rows = {}
    for row in merged_rows(page, ["name", *columns]):
        rows.setdefault(row.get("name"), next((row[c] for c in columns if number(row.get(c)) is not None), None))
    for agent, last in job["last"].items():
        shown = {n: v for n, v in rows.items() if n and model_name(job_name, agent).startswith(n.rstrip("…"))}
        final = last.get("eval/accuracy/mean")
        if not any(number(v) is not None and abs(number(v) - final) <= 5e-4 for v in shown.values()):
            problems.append(
                f"{agent}'s model shows eval/accuracy/mean {sorted(shown.values())}, not its last step's {final}"
            )
    return problems


def scroll_to(page, column: str, match: str = "=") -> None:
    """Scroll the grid right until the header of `column` (its col-id: equal, or containing it with match="*=") is
    drawn whole in view (at most 80 steps of 300 px)."""
    header = page.locator(f".ag-header-cell[col-id{match}'{column}']")
    for _ in range(80):
        text = header.first.evaluate(VISIBLE_TEXT) if header.count() else ""
        if text and not text.endswith("…"):
            break
        page.evaluate(SCROLL_RIGHT)
        time.sleep(0.2)
    time.sleep(1)


def check_runs(page, base: str, job: dict, out: Path) -> list[str]:
    """The parent's description opens on each agent's start → final accuracy, visible before any "Show more"; the
    agent run's Artifacts tab lists model.md; its model's page lists the held-out set under "Datasets used"."""
    from hacrl_exp.tracking.description import accuracy_text

    parent, agent = job["parent"], job["agents"][0]
    mode = "workflowType=machine_learning"
    problems = land(page, f"{base}/runs/{parent.info.run_id}?{mode}", "text=Description")
    page.screenshot(path=str(out / "parent_overview.png"))
    finals = job["jobs"][parent.info.run_name]["finals"]
    arrow = page.locator("p", has_text="→").first  # MLflow draws the description below the tags: scrolled to
    first = ""
    try:
        arrow.wait_for(timeout=15_000)
        arrow.scroll_into_view_if_needed()
        time.sleep(0.5)
        first = arrow.evaluate(VISIBLE_TEXT) or f"(not visible) {arrow.inner_text()}"
    except Exception:  # noqa: BLE001 - no such paragraph: reported below
        pass
    for key, value in finals.items():
        wanted = f"{key.rsplit('/', 1)[-1]} "
        if wanted not in first or f"→ {accuracy_text(value)}" not in first:
            problems.append(f"the description's visible first line {first!r} lacks {wanted}… → {accuracy_text(value)}")
    page.screenshot(path=str(out / "parent_description.png"))
    problems += land(page, f"{base}/runs/{agent.info.run_id}/artifacts?{mode}", "text=eval")
    if not page.get_by_text("model.md", exact=True).count():
        problems.append("the agent run's Artifacts tab lists no model.md")
    if job["model"] is not None:  # the agent's model page names the held-out set under "Datasets used"
        model_id, dataset = job["model"]
        problems += land(page, f"{base}/models/{model_id}?{mode}", "text=Datasets used")
        page.screenshot(path=str(out / "model_page.png"))
        body = page.inner_text("body")
        shown = body.split("Datasets used", 1)[-1].strip().splitlines()[:1]
        if not shown or not shown[0].startswith(dataset):
            problems.append(f"the model page's 'Datasets used' shows {shown}, not the held-out set {dataset}")
    page.screenshot(path=str(out / "agent_artifacts.png"))
    return problems


def check_reports(page, links: dict[str, str], agents: list[str], out: Path) -> list[str]:
    """Each printed report: its first screen shows each agent's bottom-line sentence (which method ended highest),
    no image is broken, and report.md is served as UTF-8 (no mojibake)."""
    problems = []
    for name, url in links.items():
        page.goto(url, wait_until="load")  # a report has no scripts: "load" has every image
        broken = page.evaluate("() => Array.from(document.images).filter(i => !i.naturalWidth).map(i => i.src)")
        problems += [f"report {name}: broken image {src}" for src in broken]
        for agent in agents:  # the bottom line, an item per agent: "**<agent>.** <method> ended (or … tied) highest, …"
            item = page.locator("li", has_text=f"{agent}.").first
            seen = item.evaluate(VISIBLE_TEXT) if item.count() else ""
            if not (seen.startswith(f"{agent}.") and re.search(r" (ended|tied) highest, at \d", seen)):
                problems.append(f"report {name}: the first screen shows no sentence saying which method is best for "
                                f"{agent} (it shows {seen[:120]!r})")  # fmt: skip
        problems += [f"report {name}: {p}" for p in page_errors(page)]
        page.screenshot(path=str(out / f"report_{name}.png"))
        page.goto(url.rsplit("/", 1)[0] + "/report.md", wait_until="load")
        problems += [f"report {name}/report.md: {p}" for p in page_errors(page)]
    return problems


LINK_CHECKS = {
    "final accuracy": check_final_view,
    "compare methods": check_methods_view,
    "compare configurations": check_compare_view,
    "models": check_models,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="tracking URI, e.g. sqlite:////tmp/ui/mlflow.db")
    parser.add_argument("--out", required=True, type=Path, help="folder for the PNG screenshots")
    parser.add_argument("--experiment", help="experiment name (default: the newest training job's)")
    parser.add_argument("--reports", type=Path, help="reports folder for the UI to serve (default: the repository's)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ui, printed = start_ui(args.store, args.reports, args.out / "ui.log")
    print(f"python -m hacrl_exp.ui answered in {time.monotonic() - started:.0f} s", flush=True)
    job = pick_job(args.store, args.experiment)  # after the UI wrote its views
    links = parse_links(printed)
    print("\n".join(printed))
    mine = links.get(job["experiment"].name, {})
    agents = sorted({a.data.tags["agent"] for a in job["agents"]})
    results: dict[str, list[str]] = {}
    try:
        with sync_playwright() as playwright:
            browser = Browser(playwright, args.chromium, args.width, args.height)
            try:
                for label, check in LINK_CHECKS.items():  # each printed link in a fresh profile
                    url = links["mlflow"].get(label) or mine.get(label)
                    missing = [f"python -m hacrl_exp.ui printed no {label!r} link"]
                    started = time.monotonic()
                    results[label] = check(browser.page(), url, job, args.out) if url else missing
                    print(f"{label}: checked in {time.monotonic() - started:.0f} s", flush=True)
                base = links["mlflow"]["home"].split("/#/")[0] + f"/#/experiments/{job['experiment'].experiment_id}"
                results["runs"] = check_runs(browser.page(), base, job, args.out)
                results["reports"] = check_reports(browser.page(), links.get("reports", {}), agents, args.out)
                results["server"] = [f"server error: {f}" for f in browser.failed]
            finally:
                browser.close()
    finally:
        os.kill(ui.pid, signal.SIGTERM)  # hacrl_exp.ui stops its servers
        ui.wait(timeout=60)
    for check, problems in results.items():
        print(f"{check}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"ERROR {check}: {problem}", file=sys.stderr)
    return 1 if any(results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
