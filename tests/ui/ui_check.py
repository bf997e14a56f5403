"""Look at a store's runs the way a researcher does: start `python -m hacrl_exp.ui` on it, open the links it prints
in headless Chromium (each in a fresh profile, as a first visit), check what the pages show, and save PNGs.

    python -m tests.ui.ui_check --store sqlite:////tmp/ui/mlflow.db --out /tmp/ui/shots [--reports reports]
    pytest --run-ui tests/ui        # the same on a store of two tiny jobs (tests/ui/test_ui_check.py), opt-in

Checks (exit status 1 when any fails, 0 otherwise; each problem is one `ERROR` line on stderr):
- every printed MLflow link (home, final accuracy, compare configurations, models) opens in "Model training" mode;
- final accuracy: the job rows show the final/accuracy_mean/<agent> values the MLflow API has, in visible cells;
- compare configurations: agent runs grouped by agent and config, no "(none)" group, one group per (agent,
  config) of the store; the visible legend of the expanded eval/accuracy/mean chart names each group's agent;
- models: the newest job's models, named <job>-<agent>, show the final eval/accuracy/mean (the run's last step);
- the parent run's description starts with its overrides and holds each agent's final accuracy and the command;
  the agent run's Artifacts tab lists model.md;
- the expanded cross/omega chart of the newest job whose agents share rollouts: its visible legend (the text a
  reader sees, clipped and cut by ellipses as drawn, not the page text) names every agent run;
- no page shows an error text, the server answers no request with 5xx, and no printed report has a broken image.
Needs the `ui` extra (playwright) and a Chromium binary (Debian's `chromium`): docs/tracking.md. Not part of the
default test run: the `ui` marker is skipped unless `pytest --run-ui` or HACRL_RUN_UI=1 asks for it.
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
from urllib.parse import quote

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
ERROR_TEXTS = ("Something went wrong", "Internal Server Error", "RESOURCE_DOES_NOT_EXIST", "Page not found")
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
    """The newest finished job whose agents share rollouts (they log cross/omega), else the newest finished job:
    its experiment, parent run and agent runs, and the (agent, config) groups of its experiment."""
    from mlflow.tracking import MlflowClient

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
    all_agents = client.search_runs([exp.experiment_id], "tags.role = 'agent'", max_results=50_000)
    groups = {(r.data.tags.get("agent"), r.data.tags.get("config")) for r in all_agents}
    finals = {}
    for job in client.search_runs([exp.experiment_id], "tags.role = 'parent'", max_results=50_000):
        finals[job.info.run_name] = {k: v for k, v in job.data.metrics.items() if k.startswith("final/accuracy_mean/")}
    last = {a.data.tags["agent"]: last_step_metrics(client, a.info.run_id) for a in agents}
    return {"experiment": exp, "parent": parent, "agents": agents, "groups": groups, "finals": finals, "last": last}


def last_step_metrics(client, run_id: str) -> dict[str, float]:
    """A run's metrics at its last step (what its final model must carry)."""
    history = {k: client.get_metric_history(run_id, k) for k in client.get_run(run_id).data.metrics}
    last = max(m.step for points in history.values() for m in points)
    return {k: m.value for k, points in history.items() for m in points if m.step == last}


class Browser:
    """Headless Chromium; `page()` opens a fresh profile (no remembered UI mode), every 5xx answer is recorded."""

    def __init__(self, playwright, chromium: str, width: int, height: int) -> None:
        self.playwright, self.chromium, self.viewport = playwright, chromium, {"width": width, "height": height}
        self.contexts, self.failed, self.profiles = [], [], []

    def page(self):
        self.profiles.append(tempfile.mkdtemp(prefix="ui_check_"))
        context = self.playwright.chromium.launch_persistent_context(
            self.profiles[-1], executable_path=self.chromium, args=CHROMIUM_FLAGS, viewport=self.viewport
        )
        self.contexts.append(context)
        page = context.new_page()
        page.on("response", lambda r: self.failed.append(f"{r.status} {r.url}") if r.status >= 500 else None)
        return page

    def close(self) -> None:
        for context in self.contexts:
            context.close()
        for profile in self.profiles:
            shutil.rmtree(profile, ignore_errors=True)


def land(page, url: str, wait_for: str, settle_s: float = 4.0) -> list[str]:
    """Open url, wait for `wait_for`, close the assistant panel and the shared-view banner; the problems seen."""
    page.goto(url, wait_until="load")  # the UI polls running runs: "networkidle" may never come
    try:
        page.wait_for_selector(wait_for, timeout=60_000)
    except Exception:  # noqa: BLE001 - reported; the screenshot shows what rendered instead
        return [f"nothing matching {wait_for!r} rendered in 60 s"]
    time.sleep(settle_s)
    for button in ("mlflow.assistant.chat_panel.close", "mlflow.experiment_page.shared_view.dismiss"):
        found = page.locator(f'[data-component-id="{button}"]')
        if found.count() and found.first.is_visible():
            found.first.click()
    time.sleep(1)
    return page_errors(page)


def page_errors(page) -> list[str]:
    body = page.inner_text("body")
    return [f"the page shows {text!r}" for text in ERROR_TEXTS if text in body]


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
    try:
        return float(text.replace("…", "")) if text else None
    except ValueError:
        return None


def check_final_view(page, url: str, job: dict, out: Path) -> list[str]:
    problems = land(page, url, ".ag-row") + model_training_mode(page)
    agents = [a.data.tags["agent"] for a in job["agents"]]
    name_col = "attributes.`Run Name`"
    columns = [name_col] + [f"metrics.`final/accuracy_mean/{a}`" for a in agents]
    page.screenshot(path=str(out / "runs_table.png"))
    rows = [r for r in merged_rows(page, columns) if r.get(name_col)]
    shown = 0
    for row in rows:
        expected = job["finals"].get(row[name_col])
        if expected is None:  # a name cut by an ellipsis: no job to compare with
            problems.append(f"run name {row[name_col]!r} is not readable in full")
            continue
        for agent in agents:
            key = f"final/accuracy_mean/{agent}"
            value = number(row.get(f"metrics.`{key}`"))
            if key in expected and (value is None or abs(value - expected[key]) > 5e-4):
                problems.append(f"{row[name_col]}: {key} shows {row.get(f'metrics.`{key}`')!r}, not {expected[key]}")
            shown += key in expected
    if not shown:
        problems.append("no job row shows a final/accuracy_mean/<agent> value")
    return problems


def check_compare_view(page, url: str, job: dict, out: Path) -> list[str]:
    problems = land(page, url, CARD) + model_training_mode(page)
    page.screenshot(path=str(out / "compare.png"))
    labels = [t for t in page.locator("span[title]").evaluate_all("els => els.map(e => e.title)") if "agent:" in t]
    seen = {tuple(re.fullmatch(r"agent: (.*), config: (.*)", t).groups()) for t in labels if "config:" in t}
    problems += [f"an empty group is listed: {t!r}" for t in labels if "(none)" in t]
    if seen != job["groups"]:
        problems.append(f"groups shown {sorted(seen)} differ from the store's (agent, config) {sorted(job['groups'])}")
    problems += expanded_legend(page, "eval/accuracy/mean", sorted({f"agent: {a}," for a, _ in job["groups"]}))
    page.screenshot(path=str(out / "compare_chart.png"))
    return problems


def expanded_legend(page, metric: str, names: list[str]) -> list[str]:
    """Expand the chart of `metric` and check that each of `names` starts the visible text of a legend entry."""
    card = page.locator(CARD, has=page.locator(f'h4[title="{metric}"]')).first
    if not card.count():
        return [f"no {metric} chart"]
    card.locator('[data-component-id="fullscreen_button_chartcard"]').click()
    page.wait_for_selector('[role="dialog"] .js-plotly-plot', timeout=30_000)
    time.sleep(3)
    texts = [t for t in visible_texts(page, '[role="dialog"] span') if t.endswith(f"({metric})") or "…" in t]
    missing = [n for n in names if not any(t.startswith(n) for t in texts)]
    return [f"the visible legend of {metric} lacks {missing} (it shows {texts})"] if missing else []


SCROLL_RIGHT = "() => { document.querySelector('.ag-body-horizontal-scroll-viewport').scrollLeft += 150 }"


def check_models(page, url: str, job: dict, out: Path) -> list[str]:
    """The job's models on the Models page show the run's last-step eval/accuracy/mean and final/accuracy_mean."""
    from hacrl_exp.tracking.names import model_name

    problems = land(page, url, ".ag-row") + model_training_mode(page)
    handle = page.locator('.ag-header-cell[col-id="name"] .ag-header-cell-resize')
    if handle.count():  # widen the name column as a reader would, to see the agent at its end
        box = handle.first.bounding_box()
        page.mouse.move(box["x"] + 2, box["y"] + 5)
        page.mouse.down()
        page.mouse.move(box["x"] + 260, box["y"] + 5, steps=5)
        page.mouse.up()
    job_name = job["parent"].info.run_name
    for metric in ("eval/accuracy/mean", "final/accuracy_mean"):  # adjacent columns: both in view at the second
        column = f'metrics.{{"metricKey":"{metric}"}}'
        scroll_to(page, column)
        rows = {n: v for n, v in ((r.get("name"), r.get(column)) for r in merged_rows(page, ["name", column])) if n}
        for agent, last in job["last"].items():
            name, final = model_name(job_name, agent), last.get(metric)
            shown = rows.get(name)
            if shown is None:
                problems.append(f"model {name}: no visible {metric} (visible models: {sorted(rows)})")
            elif final is None or number(shown) is None or abs(number(shown) - final) > 5e-4:
                problems.append(f"model {name} shows {metric} {shown!r}, not its run's last-step {final}")
    page.screenshot(path=str(out / "models.png"))
    return problems


def scroll_to(page, column: str) -> None:
    """Scroll the grid right until the header of `column` is drawn whole in view (at most 60 steps)."""
    header = page.locator(f".ag-header-cell[col-id='{column}']")
    for _ in range(60):
        text = header.first.evaluate(VISIBLE_TEXT) if header.count() else ""
        if text and not text.endswith("…"):
            break
        page.evaluate(SCROLL_RIGHT)
        time.sleep(0.3)
    time.sleep(1)


def check_runs(page, base: str, job: dict, out: Path) -> list[str]:
    """The parent's description, the agent's Artifacts tab and model charts, the one-job cross/omega overlay."""
    from hacrl_exp.tracking.description import accuracy_text

    parent, agent = job["parent"], job["agents"][0]
    mode = "workflowType=machine_learning"
    problems = land(page, f"{base}/runs/{parent.info.run_id}?{mode}", "text=Description")
    description = page.locator("text=Overrides:").first
    if not description.count():
        problems.append("the parent's description has no Overrides line")
    else:
        more = page.get_by_text("Show more", exact=True)
        if more.count():
            more.first.click()
            time.sleep(1)
        text = page.inner_text("body")
        finals = [accuracy_text(v) for v in job["finals"][parent.info.run_name].values()]
        wanted = finals + ([parent.data.tags["command"][:60]] if "command" in parent.data.tags else [])
        problems += [f"the parent's description lacks {w!r}" for w in wanted if w not in text]
    page.screenshot(path=str(out / "parent_overview.png"))
    problems += land(page, f"{base}/runs/{agent.info.run_id}/artifacts?{mode}", "text=eval")
    if not page.get_by_text("model.md", exact=True).count():
        problems.append("the agent run's Artifacts tab lists no model.md")
    page.screenshot(path=str(out / "agent_artifacts.png"))
    problems += land(page, f"{base}/runs/{agent.info.run_id}/model-metrics?{mode}", ".js-plotly-plot")
    page.screenshot(path=str(out / "agent_charts.png"))
    if any("cross/omega" in a.data.metrics for a in job["agents"]):
        # one job's agent runs; sorted by name, MLflow does not fetch (and nest them under) their parent
        one_job = quote(f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
        by_name = f"orderByKey={quote('tags.`mlflow.runName`')}&orderByAsc=true"
        problems += land(page, f"{base}/runs?{mode}&compareRunsMode=CHART&searchFilter={one_job}&{by_name}", CARD)
        page.get_by_placeholder("Search metric charts").fill("cross/omega")
        time.sleep(3)
        problems += expanded_legend(page, "cross/omega", [f"{a.info.run_name} (" for a in job["agents"]])
        page.screenshot(path=str(out / "omega_overlay.png"))
    return problems


def check_reports(page, links: dict[str, str], out: Path) -> list[str]:
    problems = []
    for name, url in links.items():
        page.goto(url, wait_until="load")
        time.sleep(1)
        broken = page.evaluate("() => Array.from(document.images).filter(i => !i.naturalWidth).map(i => i.src)")
        problems += [f"report {name}: broken image {src}" for src in broken]
        page.screenshot(path=str(out / f"report_{name}.png"))
    return problems


def check_home(page, url: str, job: dict, out: Path) -> list[str]:
    problems = land(page, url, "text=Experiments") + model_training_mode(page)
    page.screenshot(path=str(out / "home.png"))
    return problems


LINK_CHECKS = {
    "home": check_home,
    "final accuracy": check_final_view,
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
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    job = pick_job(args.store, args.experiment)
    ui, printed = start_ui(args.store, args.reports, args.out / "ui.log")
    links = parse_links(printed)
    print("\n".join(printed))
    mine = links.get(job["experiment"].name, {})
    results: dict[str, list[str]] = {}
    try:
        with sync_playwright() as playwright:
            browser = Browser(playwright, args.chromium, args.width, args.height)
            try:
                for label, check in LINK_CHECKS.items():  # each printed link in a fresh profile
                    url = links["mlflow"].get(label) or mine.get(label)
                    missing = [f"python -m hacrl_exp.ui printed no {label!r} link"]
                    results[label] = check(browser.page(), url, job, args.out) if url else missing
                base = links["mlflow"]["home"].split("/#/")[0] + f"/#/experiments/{job['experiment'].experiment_id}"
                results["runs"] = check_runs(browser.page(), base, job, args.out)
                results["reports"] = check_reports(browser.page(), links.get("reports", {}), args.out)
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
