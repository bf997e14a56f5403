"""Our grader on other graders' test suites (tests/rewards/data/outside/, README there): agreement per suite, false
positives, and every disagreement with its reviewed class.

A case is (their gold, their answer, their verdict), converted to our inputs by `benchmarks.outside_cases`. Ours is
`Grader.grade` on a `response` (a text our extractor reads) or `Grader.grade_answers` on a bare `answer`, against
`normalize_gold(gold)`, without a question. Every case where ours differs from theirs is listed in
disagreements.jsonl with one of CLASSES and why; a false positive is ours 1 where their 0 stands (a disagreement not
put down to their setting or to a wrong expectation of theirs).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hacrl_exp.repo import REPO_ROOT

OUTSIDE = REPO_ROOT / "tests" / "rewards" / "data" / "outside"
SUITES = ("math-verify", "hendrycks-math", "nemo-skills")
CLASSES = {
    "ours_wrong": "ours wrong",
    "their_setting": "their setting we don't share",
    "our_policy": "our documented policy",
    "their_expectation_wrong": "their expectation wrong",
}
"""Why ours differs from theirs on a case (disagreements.jsonl `class`)."""
NOT_OURS = ("their_setting", "their_expectation_wrong")
"""Classes under which their 0 does not stand, so our 1 is no false positive."""


@dataclass
class Outcome:
    """Our verdict on one case, beside theirs."""

    case: dict
    ours: int
    reason: str
    extracted: str | None
    review: dict | None
    """Its disagreements.jsonl entry (class, why), if any."""
    ours_value: int | None = None
    """Our verdict under grader forms=value (`ours` is under the default, requested)."""

    @property
    def agrees(self) -> bool:
        return self.ours == self.case["expected"]

    @property
    def false_positive(self) -> bool:
        return self.ours == 1 and self.case["expected"] == 0 and (self.review or {}).get("class") not in NOT_OURS


def load_cases(folder: Path = OUTSIDE) -> list[dict]:
    """Every suite's cases, in suite order."""
    rows = []
    for suite in SUITES:
        text = (folder / f"{suite}.jsonl").read_text(encoding="utf-8")
        rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows


def load_reviews(folder: Path = OUTSIDE) -> dict[str, dict]:
    """Case id -> its reviewed disagreement {class, why}; a class outside CLASSES is an error."""
    reviews = {}
    for n, line in enumerate((folder / "disagreements.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if row.get("class") not in CLASSES or not row.get("why"):
                raise ValueError(f"disagreements.jsonl:{n}: class must be one of {list(CLASSES)}, with a why")
            reviews[row["id"]] = row
    return reviews


def grade_cases(grader, cases: list[dict], reviews: dict[str, dict]) -> list[Outcome]:
    """Our verdict on every case: responses through `grade` (extraction included), bare answers through
    `grade_answers`."""
    from hacrl_exp.rewards import normalize_gold

    grades: dict[int, object] = {}
    for field, grade in (("response", grader.grade), ("answer", grader.grade_answers)):
        index = [i for i, c in enumerate(cases) if field in c]
        found = grade([cases[i][field] for i in index], [normalize_gold(cases[i]["gold"]) for i in index])
        grades |= dict(zip(index, found))
    return [
        Outcome(
            c,
            int(grades[i].reward),
            grades[i].reason,
            grades[i].extracted,
            reviews.get(c["id"]),
            int(grades[i].reward_under("value")),
        )
        for i, c in enumerate(cases)
    ]


def summarise(outcomes: list[Outcome]) -> dict[str, dict]:
    """Per suite: cases, agreement (all, and on cases that depend on no setting of theirs), false positives,
    disagreements per class (unreviewed ones under 'unreviewed')."""
    out = {}
    for suite in SUITES:
        mine = [o for o in outcomes if o.case["suite"] == suite]
        free = [o for o in mine if not o.case["depends_on"]]
        classes = Counter((o.review or {}).get("class", "unreviewed") for o in mine if not o.agrees)
        out[suite] = {
            "cases": len(mine),
            "agree": sum(o.agrees for o in mine),
            "setting_free": len(free),
            "setting_free_agree": sum(o.agrees for o in free),
            "false_positives": sum(o.false_positive for o in mine),
            "disagreements": dict(classes),
        }
    return out


def print_outside(outcomes: list[Outcome]) -> dict[str, dict]:
    """The table per suite, then every disagreement with its class; returns `summarise`."""
    summary = summarise(outcomes)
    print("\n### Outside suites (tests/rewards/data/outside): our verdicts against theirs\n")
    print("| suite | cases | agreement | setting-free cases | agreement there | false pos. | disagreements by class |")
    print("|---|---|---|---|---|---|---|")
    for suite, s in summary.items():
        by_class = ", ".join(f"{CLASSES.get(k, k)} {v}" for k, v in sorted(s["disagreements"].items())) or "none"
        print(
            f"| {suite} | {s['cases']} | {s['agree']}/{s['cases']} ({s['agree'] / s['cases']:.1%}) | "
            f"{s['setting_free']} | {s['setting_free_agree']}/{s['setting_free']} "
            f"({s['setting_free_agree'] / max(s['setting_free'], 1):.1%}) | {s['false_positives']} | {by_class} |"
        )
    value = Counter(o.case["suite"] for o in outcomes if o.ours_value == o.case["expected"])
    print(f"\nAgreement under grader forms=value (the value alone decides): {dict(value)}")
    print("\nDisagreements (ours vs theirs):")
    for o in outcomes:
        if not o.agrees:
            review = o.review or {"class": "unreviewed", "why": "not in disagreements.jsonl"}
            print(
                f"- {o.case['id']} [{CLASSES.get(review['class'], review['class'])}] theirs {o.case['expected']}, "
                f"ours {o.ours} ({o.reason}): gold {o.case['gold']!r}, read {o.extracted!r}; {review['why']}"
            )
    return summary
