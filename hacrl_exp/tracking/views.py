"""Saved views of MLflow's UI that open a training experiment at a glance, and the links that land on them.

MLflow 3.17's UI keeps a saved view in an experiment tag `mlflow.sharedViewState.<key>` (a JSON envelope: name,
createdAt, updatedAt and `state`, the runs page's own JSON state: its search facets and UI state such as
selectedColumns, columnWidths, groupBy, runsHiddenMode) and opens it from the URL parameter `viewStateShareKey=<key>`;
the view also appears in the page's saved-views menu. Three views per training experiment:

    FINAL_VIEW    "Final accuracy": the runs table, one row per job, newest first: name, method, seed, its final
                  held-out accuracy and start → final per agent, fitting 1440 px with the Assistant panel open;
                  then Created, Duration and the overrides
    METHODS_VIEW  "Compare methods": the agent runs of one setting (the newest job's `setting` tag: configuration
                  without method and seed), grouped by agent and method, each run charted in its method's colour
    COMPARE_VIEW  "Compare configurations": agent runs only, grouped by agent and the `config` tag (seeds of one
                  configuration averaged, jobs that differ in any override, commit or rerun apart), every group
                  charted; sorted by run name, which also keeps MLflow from fetching the parents of the runs it
                  shows (sorted by start time it adds them, and they would form empty "agent: (none)" groups)

Links carry `workflowType=machine_learning` too: the UI keeps a per-browser mode, GenAI by default, that neither the
experiment's kind tag nor a saved view switches. (MLflow UI internals, read from its 3.17.2 bundle: the envelope is
parsed by its saved-view loader, the column ids are its canonical `metrics.\\`key\\`` / `tags.\\`key\\`` keys.)
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Mapping

VIEW_TAG = "mlflow.sharedViewState."
FINAL_VIEW = "hacrl-final-accuracy"
COMPARE_VIEW = "hacrl-compare"
METHODS_VIEW = "hacrl-methods"
MODE = "workflowType=machine_learning"
FINAL_METRIC = "final/accuracy_mean"
"""Each agent run's final held-out accuracy; the parent logs it per agent as `final/accuracy_mean/<agent>`."""


def column(kind: str, key: str) -> str:
    """The UI's id of a runs-table column: kind metrics | tags | params | attributes."""
    return f"{kind}.`{key}`"


NAME_WIDTH, METHOD_WIDTH, SEED_WIDTH, GAIN_WIDTH, FINAL_WIDTH = 210, 80, 50, 125, 90
"""Final-accuracy column widths in px. At 1440 px on a first visit (MLflow's sidebar, and its Assistant panel open)
the table is ~818 px wide: the checkbox (68) and pinned Created (148) columns, then the name, method, seed and two
agents' start → final columns fit (816)."""


def final_view(agents: list[str]) -> dict:
    """The runs table at a glance, one row per job (parents only), newest first: name, method, seed, each agent's
    start → final held-out accuracy (tag `gain/<agent>`: its header names the agent, which the cut header of
    `final/accuracy_mean/<agent>` does not), then each agent's `final/accuracy_mean/<agent>` (to sort by) and
    Duration; the overrides last. MLflow pins Created after the name."""
    finals = [column("metrics", f"{FINAL_METRIC}/{agent}") for agent in agents]
    gains = [column("tags", f"gain/{agent}") for agent in agents]
    first = [column("tags", "method"), column("tags", "seed"), *gains, *finals]
    widths = {column("attributes", "Run Name"): NAME_WIDTH, column("tags", "method"): METHOD_WIDTH}
    widths |= {column("tags", "seed"): SEED_WIDTH, **dict.fromkeys(gains, GAIN_WIDTH)}
    widths |= dict.fromkeys(finals, FINAL_WIDTH)
    order = [column("attributes", "Run Name"), "runDateAndNestInfo", *first, "duration", column("tags", "overrides")]
    return {
        "searchFilter": "tags.role = 'parent'",
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": first + [column("tags", "overrides")],
        "columnOrder": order,
        "columnWidths": widths,
    }


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
        **sized(
            {column("attributes", "Run Name"): NAME_WIDTH}, [column("metrics", FINAL_METRIC), column("tags", "config")]
        ),
    }


def methods_view(setting: str | None) -> dict:
    """The methods run on one setting (tag `setting`: the configuration without method and seed), agent runs
    grouped by agent and method in the table; the charts draw each run in its method's colour (`method_colour`,
    the run's `mlflow.runColor` tag: MLflow colours groups by a hash of their key, which no view can set);
    eval/accuracy charts first. setting None: every agent run."""
    where = "tags.role = 'agent'" + (f" and tags.setting = '{setting}'" if setting else "")
    columns = [column("tags", "method"), column("metrics", FINAL_METRIC), column("tags", "seed")]
    return {
        "searchFilter": where,
        "orderByKey": column("tags", "mlflow.runName"),
        "orderByAsc": True,
        "groupBy": {
            "aggregateFunction": "average",
            "groupByKeys": [{"mode": "tag", "groupByData": "agent"}, {"mode": "tag", "groupByData": "method"}],
        },
        "useGroupedValuesInCharts": False,
        "runsHiddenMode": "SHOW_ALL",
        "hideEmptyCharts": True,
        "chartsSearchFilter": "eval/accuracy",
        "selectedColumns": columns,
        **sized({column("attributes", "Run Name"): NAME_WIDTH}, columns),
    }


def sized(widths: dict[str, int], columns: list[str]) -> dict:
    """columnOrder and columnWidths for the runs table: the UI applies widths only to columns in columnOrder, so the
    order lists the name, Created and Duration columns, then `columns`."""
    order = [column("attributes", "Run Name"), "runDateAndNestInfo", "duration", *columns]
    return {"columnOrder": order, "columnWidths": widths}


METHOD_COLOURS = {"hacpo": "#d62728", "gspo": "#1f77b4", "gspo_x2": "#17becf", "grpo": "#bcbd22", "naive": "#ff7f0e",
                  "gspo_update_matched": "#6baed6", "hacpo-no_capability_advantage": "#9467bd",
                  "hacpo-no_omega": "#8c564b", "hacpo-no_exponential_is": "#e377c2", "hacpo-no_stepwise": "#2ca02c",
                  "hacpo-no_clip": "#393b79", "gspo_dynamic": "#e7ba52",
                  "hacpo_shuffled_partner": "#843c39"}  # fmt: skip
"""A method's colour (by its `method` tag) in every MLflow view and every report figure (hacrl_exp.report.plots reads
it under the reports' labels)."""
OTHER_COLOURS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")


def method_colour(method: str) -> str:
    """The colour of a method tag: METHOD_COLOURS, else a stable pick of OTHER_COLOURS by the tag's CRC32."""
    return METHOD_COLOURS.get(method) or OTHER_COLOURS[zlib.crc32(method.encode()) % len(OTHER_COLOURS)]


VIEWS = {FINAL_VIEW: "Final accuracy", METHODS_VIEW: "Compare methods", COMPARE_VIEW: "Compare configurations"}


def view_agents(experiment_tags: Mapping[str, str]) -> list[str]:
    """The agents whose final-accuracy columns the experiment's FINAL_VIEW shows now (empty without the view)."""
    try:
        state = json.loads(json.loads(experiment_tags[VIEW_TAG + FINAL_VIEW])["state"])
    except (KeyError, ValueError, TypeError):
        return []
    prefix = column("metrics", FINAL_METRIC + "/")[:-1]
    return [c[len(prefix) : -1] for c in state.get("selectedColumns", []) if c.startswith(prefix)]


def view_tags(experiment_tags: Mapping[str, str], agents: list[str], setting: str | None = None) -> dict[str, str]:
    """The experiment tags to write so the views exist, FINAL_VIEW shows `agents` too (agents it shows already
    stay, first) and METHODS_VIEW shows `setting` (None: the one it shows); {} when nothing changes. A view
    rewritten keeps its createdAt."""
    known = view_agents(experiment_tags)
    setting = setting or view_setting(experiment_tags)
    states = {
        FINAL_VIEW: final_view(known + [a for a in agents if a not in known]),
        METHODS_VIEW: methods_view(setting),
        COMPARE_VIEW: compare_view(),
    }
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


def view_setting(experiment_tags: Mapping[str, str]) -> str | None:
    """The setting METHODS_VIEW shows now (None without the view, or when it shows every setting)."""
    try:
        where = json.loads(json.loads(experiment_tags[VIEW_TAG + METHODS_VIEW])["state"])["searchFilter"]
    except (KeyError, ValueError, TypeError):
        return None
    found = re.search(r"tags\.setting = '([^']*)'", where)
    return found.group(1) if found else None


def write_views(
    client, experiment_id: str, agents: list[str], tags: Mapping[str, str] | None = None, setting: str | None = None
) -> None:
    """Create or update the experiment's saved views (`view_tags`); tags: the experiment's, if already read;
    setting: the one METHODS_VIEW shows (a new job's)."""
    tags = client.get_experiment(experiment_id).tags if tags is None else tags
    for key, value in view_tags(tags, agents, setting).items():
        client.set_experiment_tag(experiment_id, key, value)


def runs_link(base: str, experiment_id: str, view: str | None = FINAL_VIEW, charts: bool = False) -> str:
    """The experiment's runs page at server `base` (http://host:port, no trailing slash), in "Model training" mode,
    opened on saved view `view` (None: none), in the chart view when `charts`."""
    query = MODE + (f"&viewStateShareKey={view}" if view else "") + ("&compareRunsMode=CHART" if charts else "")
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def home_link(base: str) -> str:
    """MLflow's home page at `base` in "Model training" mode (the bare URL opens the GenAI mode)."""
    return f"{base}/#/?{MODE}"
