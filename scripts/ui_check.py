"""Look at a store's runs the way a researcher does: start `mlflow ui` on 127.0.0.1, open the experiment's runs table,
one run's metric charts, its parent's overview and optionally a report's HTML in headless Chromium, and save PNGs.

    python scripts/ui_check.py --store sqlite:////tmp/ui/mlflow.db --out /tmp/ui/shots [--report reports/x/report.html]

Exit status 1 when a page shows an error (an error banner, "Something went wrong", a failed API call) or a report
image is broken (naturalWidth == 0); 0 otherwise. Needs the `ui` extra (playwright) and a Chromium binary (Debian's
`chromium`; Playwright's own browser download is not needed): docs/tracking.md.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

PLOT = ".js-plotly-plot"
"""A drawn MLflow metric chart (plotly); the sidebar's icons are svg too, so "svg" alone matches too early."""
ERROR_TEXTS = ("Something went wrong", "Internal Server Error", "RESOURCE_DOES_NOT_EXIST", "Page not found")


def start_ui(store: str, port: int, log_path: Path) -> subprocess.Popen:
    """`mlflow ui` for the store on 127.0.0.1:port, waited for until it answers (180 s: slow on a loaded machine)."""
    mlflow = Path(sys.executable).with_name("mlflow")
    command = [str(mlflow), "ui", "--backend-store-uri", store, "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stdout=log_path.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"mlflow ui exited ({server.returncode}); see {log_path}") from None
            time.sleep(1)
    server.terminate()
    raise SystemExit(f"mlflow ui did not answer on port {port} in 180 s; see {log_path}")


def pick_runs(store: str, experiment: str | None) -> tuple[str, str, str]:
    """(experiment id, a parent training run id, one of its agent runs' id): the newest finished job whose agents
    share rollouts (they log cross/omega), else the newest finished job."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    experiments = [client.get_experiment_by_name(experiment)] if experiment else client.search_experiments()
    found = []
    for exp in experiments:
        query = "tags.role = 'parent' and attributes.status = 'FINISHED'"
        for parent in client.search_runs([exp.experiment_id], query, order_by=["start_time DESC"]):
            children = agent_runs(store, exp.experiment_id, parent.info.run_id)
            if children:
                sharing = any("cross/omega" in child.data.metrics for child in children)
                found.append((not sharing, exp.experiment_id, parent.info.run_id, children[0].info.run_id))
                if sharing:
                    break
    if not found:
        raise SystemExit(f"no finished training job (a role=parent run with agent runs) in {store}")
    return min(found, key=lambda f: f[0])[1:]


def agent_runs(store: str, experiment_id: str, parent_id: str) -> list:
    """The agent runs of one job."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    return client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")


def page_errors(page) -> list[str]:
    """Error texts visible on the page."""
    body = page.inner_text("body")
    return [text for text in ERROR_TEXTS if text in body]


def shoot(page, url: str, path: Path, wait_for: str | None = None, settle_s: float = 4.0) -> list[str]:
    """Open url, wait for the app to render, save a full-page PNG; returns the errors seen."""
    page.goto(url, wait_until="load")  # the UI polls running runs: "networkidle" may never come
    missing = []
    if wait_for:
        try:
            page.wait_for_selector(wait_for, timeout=30_000)
        except Exception:  # noqa: BLE001 - reported, and the screenshot shows what rendered instead
            missing = [f"nothing matching {wait_for!r} rendered in 30 s"]
    time.sleep(settle_s)  # charts draw after the data arrives
    page.screenshot(path=str(path), full_page=False)
    return page_errors(page) + missing


def close_assistant(page) -> None:
    """Close the assistant panel MLflow 3 opens beside the runs, as a researcher would once."""
    close = page.get_by_role("button", name="Close")
    if close.count():
        close.first.click()
    time.sleep(1)


def model_training_mode(page) -> list[str]:
    """[] when the mode switch shows "Model training" selected. MLflow draws the unselected label in its secondary
    (lighter) text colour, so the selected one is the darker of the two."""
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
    return [] if darkness[0] > darkness[1] else ["the UI opened in GenAI mode, not Model training"]


def overlay_chart(page, url: str, path: Path, metric: str, agents: list[str]) -> list[str]:
    """The chart view of one job's agent runs (`url` filters on their parent, whose row is expanded), charts
    filtered to `metric`: one chart whose legend must name every agent (the same key in each agent's run). Returns
    the problems seen."""
    page.goto(url, wait_until="load")
    page.wait_for_selector("text=Run Name", timeout=20_000)
    time.sleep(3)
    expanders = page.locator("button[data-component-id*='runnamecellrenderer']")
    for i in range(expanders.count()):
        expanders.nth(i).click()
        time.sleep(0.5)
    page.get_by_placeholder("Search metric charts").fill(metric)
    time.sleep(4)
    page.screenshot(path=str(path), full_page=False)
    legend = page.inner_text("body")
    missing = [a for a in agents if f"{a} ({metric})" not in legend]
    return page_errors(page) + [f"{metric} chart has no line of {missing}"] * bool(missing)


def broken_images(page) -> list[str]:
    """src of every <img> that failed to load (naturalWidth 0 once complete)."""
    return page.evaluate("() => Array.from(document.images).filter(i => !i.naturalWidth).map(i => i.src)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="tracking URI, e.g. sqlite:////tmp/ui/mlflow.db")
    parser.add_argument("--out", required=True, type=Path, help="folder for the PNG screenshots")
    parser.add_argument("--experiment", help="experiment name (default: the newest training job's)")
    parser.add_argument("--report", type=Path, help="a report's report.html to open too")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    experiment_id, parent_id, child_id = pick_runs(args.store, args.experiment)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a port free now; mlflow ui binds it next
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = start_ui(args.store, port, args.out / "mlflow_ui.log")
    problems: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            failed: list[str] = []
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 500 else None)
            base = f"http://127.0.0.1:{port}/#/experiments/{experiment_id}"
            mode = "workflowType=machine_learning"  # the link `python -m hacrl_exp.run` prints at the end
            page.goto(f"{base}/runs?{mode}", wait_until="load")
            page.wait_for_selector("text=Run Name", timeout=20_000)
            problems += [f"runs_table: {e}" for e in model_training_mode(page)]
            close_assistant(page)
            pages = {
                "runs_table": (f"{base}/runs?{mode}", "text=Run Name"),
                "agent_charts": (f"{base}/runs/{child_id}/model-metrics?{mode}", PLOT),
                "parent_overview": (f"{base}/runs/{parent_id}?{mode}", "text=Metrics"),
                "experiment_charts": (f"{base}/runs?{mode}&compareRunsMode=CHART", PLOT),
            }
            for name, (url, selector) in pages.items():
                errors = shoot(page, url, args.out / f"{name}.png", selector) + model_training_mode(page)
                problems += [f"{name}: {e}" for e in errors]
                print(f"{name}: {args.out / f'{name}.png'}" + (f"  ERRORS {errors}" if errors else ""))
            agents = [r.data.tags.get("agent", "") for r in agent_runs(args.store, experiment_id, parent_id)]
            one_job = quote(f"tags.mlflow.parentRunId = '{parent_id}'")  # MLflow charts only its first 10 runs
            errors = overlay_chart(
                page,
                f"{base}/runs?{mode}&compareRunsMode=CHART&searchFilter={one_job}",
                args.out / "omega_overlay.png",
                "cross/omega",
                agents,
            )
            problems += [f"omega_overlay: {e}" for e in errors]
            print(f"omega_overlay: {args.out / 'omega_overlay.png'}" + (f"  ERRORS {errors}" if errors else ""))
            problems += [f"server error: {f}" for f in failed]
            if args.report:
                page.goto(args.report.resolve().as_uri(), wait_until="load")
                page.screenshot(path=str(args.out / "report.png"), full_page=True)
                broken = broken_images(page)
                problems += [f"report: broken image {src}" for src in broken]
                print(f"report: {args.out / 'report.png'} ({len(broken)} broken images)")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    for problem in problems:
        print("ERROR", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
