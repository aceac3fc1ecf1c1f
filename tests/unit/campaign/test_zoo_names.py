"""The campaign's torch-free copy of the zoo's names is the zoo's own list."""

from __future__ import annotations

from stash_core.campaign.zoo_names import zoo_models
from stash_core.zoo import list_models


def test_the_names_are_the_zoo_registry_s():
    assert zoo_models() == list_models()
