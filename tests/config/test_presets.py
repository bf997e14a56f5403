"""The tiny-run preset composes for every agents preset it names, and names exactly that preset's members."""

import pytest

from hacrl_exp.config.presets import AGENT_MEMBERS, tiny_overrides
from hacrl_exp.trainer.validate import preflight


@pytest.mark.parametrize("agents", sorted(AGENT_MEMBERS))
def test_tiny_preset_composes_with_the_presets_members(agents):
    algorithm = "algorithm=gspo" if len(AGENT_MEMBERS[agents]) == 1 else "algorithm=hacpo"
    config = preflight([*tiny_overrides(agents, steps=2), algorithm, "tracking.backend=none"])
    assert list(config.agents.members) == AGENT_MEMBERS[agents]
    assert config.trainer.steps == 2
    assert all(member.model.hidden_size == 32 for member in config.agents.members.values())
