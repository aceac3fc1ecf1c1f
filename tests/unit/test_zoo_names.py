"""The torch-free copy of the zoo's names is the zoo's own list."""

from __future__ import annotations

from stash_core.zoo import list_models
from stash_core.zoo_names import canonical_model, zoo_models


def test_the_names_are_the_zoo_registry_s():
    assert zoo_models() == list_models()


def test_a_zoo_name_in_any_case_is_stored_in_lower_case_and_a_user_model_as_given():
    assert canonical_model(" ResNet50 ") == "resnet50"
    assert canonical_model("BERT_base") == "bert_base"
    assert canonical_model(" models/Net.py:Make ") == "models/Net.py:Make"
    assert canonical_model("script:Train") == "script:Train"
