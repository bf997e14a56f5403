"""Saved views of MLflow's UI that open a training experiment at a glance, and the links that land on them.

MLflow 3.17's UI keeps a saved view in an experiment tag `mlflow.sharedViewState.<key>` (a JSON envelope: name,
createdAt, updatedAt and `state`, the runs page's own JSON state: its search facets and UI state such as
selectedColumns, columnWidths, groupBy, runsHiddenMode) and opens it from the URL parameter `viewStateShareKey=<key>`;
the view also appears in the page's saved-views menu. Two views per training experiment:

    FINAL_VIEW    "Final accuracy": the runs table, one row per job, newest first, with its final held-out
                  accuracy per agent (final/accuracy_mean/<agent>), method, seed and overrides
    COMPARE_VIEW  "Compare configurations": agent runs only, grouped by agent and the `config` tag (seeds of one
                  configuration averaged, jobs that differ in any override apart), every group charted; sorted by
                  run name, which also keeps MLflow from fetching the parents of the runs it shows (sorted by
                  start time it adds them, and they would form empty "agent: (none)" groups)

Links carry `workflowType=machine_learning` too: the UI keeps a per-browser mode, GenAI by default, that neither the
experiment's kind tag nor a saved view switches. (MLflow UI internals, read from its 3.17.2 bundle: the envelope is
parsed by its saved-view loader, the column ids are its canonical `metrics.\\`key\\`` / `tags.\\`key\\`` keys.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

VIEW_TAG = "mlflow.sharedViewState."
FINAL_VIEW = "hacrl-final-accuracy"
COMPARE_VIEW = "hacrl-compare"
MODE = "workflowType=machine_learning"
FINAL_METRIC = "final/accuracy_mean"
"""Each agent run's final held-out accuracy; the parent logs it per agent as `final/accuracy_mean/<agent>`."""


def column(kind: str, key: str) -> str:
    """The UI's id of a runs-table column: kind metrics | tags | params | attributes."""
    return f"{kind}.`{key}`"


def final_view(agents: list[str]) -> dict:
    """The runs table at a glance: newest job first, its final accuracy per agent, method, seed, overrides; the run
    names and accuracy columns wide enough to read."""
    finals = [column("metrics", f"{FINAL_METRIC}/{agent}") for agent in agents]
    tags = [column("tags", "method"), column("tags", "seed"), column("tags", "overrides")]
    return {
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": finals + tags,
        **sized({column("attributes", "Run Name"): 360, **dict.fromkeys(finals, 230)}, finals + tags),
    }


def sized(widths: dict[str, int], columns: list[str]) -> dict:
    """columnOrder and columnWidths for the runs table: the UI applies widths only to columns in columnOrder, so the
    order lists the name, Created and Duration columns, then `columns`."""
    order = [column("attributes", "Run Name"), "runDateAndNestInfo", "duration", *columns]
    return {"columnOrder": order, "columnWidths": widths}


def compare_view() -> dict:
    """Agent runs grouped by configuration and agent, charts of every group (not MLflow's first 10 runs)."""
    return {
        "searchFilter": "tags.role = 'agent'",
        "orderByKey": column("tags", "mlflow.runName"),
        "orderByAsc": True,
        "groupBy": {
            "aggregateFunction": "average",
            "groupByKeys": [{"mode": "tag", "groupByData": "agent"}, {"mode": "tag", "groupByData": "config"}],
        },
        "useGroupedValuesInCharts": True,
        "runsHiddenMode": "SHOW_ALL",
        "hideEmptyCharts": True,
        "chartsSearchFilter": "accuracy",
        "selectedColumns": [column("metrics", FINAL_METRIC), column("tags", "config")],
        **sized({column("attributes", "Run Name"): 360}, [column("metrics", FINAL_METRIC), column("tags", "config")]),
    }


VIEWS = {FINAL_VIEW: "Final accuracy", COMPARE_VIEW: "Compare configurations"}


def view_agents(experiment_tags: Mapping[str, str]) -> list[str]:
    """The agents whose final-accuracy columns the experiment's FINAL_VIEW shows now (empty without the view)."""
    try:
        state = json.loads(json.loads(experiment_tags[VIEW_TAG + FINAL_VIEW])["state"])
    except (KeyError, ValueError, TypeError):
        return []
    prefix = column("metrics", FINAL_METRIC + "/")[:-1]
    return [c[len(prefix) : -1] for c in state.get("selectedColumns", []) if c.startswith(prefix)]


def view_tags(experiment_tags: Mapping[str, str], agents: list[str]) -> dict[str, str]:
    """The experiment tags to write so both views exist and FINAL_VIEW shows `agents` too (agents it shows already
    stay, first); {} when nothing changes. A view rewritten keeps its createdAt."""
    known = view_agents(experiment_tags)
    states = {FINAL_VIEW: final_view(known + [a for a in agents if a not in known]), COMPARE_VIEW: compare_view()}
    now = int(time.time() * 1000)
    out = {}
    for key, state in states.items():
        try:
            old = json.loads(experiment_tags[VIEW_TAG + key])
        except (KeyError, ValueError, TypeError):
            old = {}
        if old.get("state") == json.dumps(state) and old.get("name") == VIEWS[key]:
            continue
        created = old.get("createdAt") if isinstance(old.get("createdAt"), int) else now
        envelope = {"name": VIEWS[key], "createdAt": created, "updatedAt": now, "state": json.dumps(state)}
        out[VIEW_TAG + key] = json.dumps(envelope)
    return out


def write_views(client, experiment_id: str, agents: list[str], tags: Mapping[str, str] | None = None) -> None:
    """Create or extend the experiment's saved views (`view_tags`); tags: the experiment's, if already read."""
    tags = client.get_experiment(experiment_id).tags if tags is None else tags
    for key, value in view_tags(tags, agents).items():
        client.set_experiment_tag(experiment_id, key, value)


def runs_link(base: str, experiment_id: str, view: str | None = FINAL_VIEW, charts: bool = False) -> str:
    """The experiment's runs page at server `base` (http://host:port, no trailing slash), in "Model training" mode,
    opened on saved view `view` (None: none), in the chart view when `charts`."""
    query = MODE + (f"&viewStateShareKey={view}" if view else "") + ("&compareRunsMode=CHART" if charts else "")
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def home_link(base: str) -> str:
    """MLflow's home page at `base` in "Model training" mode (the bare URL opens the GenAI mode)."""
    return f"{base}/#/?{MODE}"
