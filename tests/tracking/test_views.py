"""Saved views of MLflow's UI (hacrl_exp.tracking.views): the tags MLflow 3.17's UI reads, and links to them."""

import json

from hacrl_exp.tracking.views import (
    COMPARE_VIEW,
    FINAL_VIEW,
    METHODS_VIEW,
    VIEW_TAG,
    home_link,
    method_colour,
    runs_link,
    view_agents,
    view_setting,
    view_tags,
)


def test_the_views_are_written_as_saved_view_envelopes():
    tags = view_tags({}, ["opt_char", "gpt2_bpe"], "opt_char+gpt2_bpe-steps=3@9e7b1c8")
    assert set(tags) == {VIEW_TAG + FINAL_VIEW, VIEW_TAG + COMPARE_VIEW, VIEW_TAG + METHODS_VIEW}
    final = json.loads(tags[VIEW_TAG + FINAL_VIEW])
    assert final["name"] == "Final accuracy" and isinstance(final["createdAt"], int)
    state = json.loads(final["state"])  # the UI parses the state string as JSON (no "deflate;" prefix)
    assert state["columnOrder"] == [
        "attributes.`Run Name`",
        "runDateAndNestInfo",  # MLflow pins Created after the name
        "tags.`method`",
        "tags.`seed`",
        "tags.`gain/opt_char`",
        "tags.`gain/gpt2_bpe`",
        "metrics.`final/accuracy_mean/opt_char`",
        "metrics.`final/accuracy_mean/gpt2_bpe`",
        "duration",
        "tags.`overrides`",
    ]  # the result first, the overrides last
    first = ("Run Name", "method", "seed", "gain/opt_char", "gain/gpt2_bpe")  # beside the checkbox and Created
    assert 68 + 148 + sum(w for c, w in state["columnWidths"].items() if c.split("`")[1] in first) <= 818
    assert set(state["columnWidths"]) <= set(state["columnOrder"])  # the UI sizes only the ordered columns
    compare = json.loads(json.loads(tags[VIEW_TAG + COMPARE_VIEW])["state"])
    keys = [k["groupByData"] for k in compare["groupBy"]["groupByKeys"]]
    assert keys == ["agent", "config"] and compare["searchFilter"] == "tags.role = 'agent'"
    assert compare["orderByKey"] != "attributes.start_time"  # sorted by start time, the UI adds the parents
    methods = json.loads(json.loads(tags[VIEW_TAG + METHODS_VIEW])["state"])
    assert [k["groupByData"] for k in methods["groupBy"]["groupByKeys"]] == ["agent", "method"]
    assert methods["searchFilter"] == "tags.role = 'agent' and tags.setting = 'opt_char+gpt2_bpe-steps=3@9e7b1c8'"
    assert view_setting(tags) == "opt_char+gpt2_bpe-steps=3@9e7b1c8"
    assert view_tags(tags, ["opt_char"]) == {}  # no new setting: the view keeps its own


def test_a_method_has_one_colour():
    assert method_colour("hacpo") == "#d62728" and method_colour("gspo") != method_colour("hacpo")
    assert method_colour("hacpo-no_omega-no_clip") == method_colour("hacpo-no_omega-no_clip")  # a stable pick


def test_views_are_rewritten_only_to_add_agents():
    tags = view_tags({}, ["opt_char", "gpt2_bpe"])
    assert view_tags(tags, ["gpt2_bpe"]) == {}  # nothing new: nothing written
    more = view_tags(tags, ["llama_char", "opt_char"])
    assert list(more) == [VIEW_TAG + FINAL_VIEW]
    assert view_agents(more) == ["opt_char", "gpt2_bpe", "llama_char"]  # those shown stay, first
    before, after = (json.loads(t[VIEW_TAG + FINAL_VIEW]) for t in (tags, more))
    assert after["createdAt"] == before["createdAt"]
    assert view_agents({VIEW_TAG + FINAL_VIEW: "not json"}) == []


def test_links_land_in_model_training_mode():
    link = runs_link("http://127.0.0.1:5000", "3")
    assert link == (
        "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=hacrl-final-accuracy"
    )
    assert runs_link("http://h", "3", COMPARE_VIEW, charts=True).endswith("&compareRunsMode=CHART")
    assert runs_link("http://h", "3", None) == "http://h/#/experiments/3/runs?workflowType=machine_learning"
    assert home_link("http://h") == "http://h/#/?workflowType=machine_learning"
