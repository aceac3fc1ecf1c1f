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


def test_the_token_models_are_the_registry_s_and_an_input_of_the_other_kind_is_refused_as_the_build_does():
    import pytest

    from stash_core.errors import UsageError
    from stash_core.zoo.registry import ZOO
    from stash_core.zoo_names import TOKEN_MODELS, refuse_other_input

    assert {name for name, entry in ZOO.items() if entry.kind != "image"} == set(TOKEN_MODELS)
    with pytest.raises(UsageError, match="bert_tiny takes token ids: input shape must be one sequence"):
        refuse_other_input("bert_tiny", (3, 32, 32))
    with pytest.raises(UsageError, match="resnet18 takes images: input shape must be C,H,W"):
        refuse_other_input("ResNet18", (128,))
    refuse_other_input("resnet18", (3, 32, 32))
    refuse_other_input("m.py:make", (128,))  # a user's model: its build says


def test_campaign_and_recommend_offer_close_zoo_names_as_profile_does(tmp_path, capsys, monkeypatch):
    """`profile --model resnet5` offered resnet50; `campaign --models` and `recommend --model` did not."""
    from support import one_line_error, stash_here

    db = str(tmp_path / "r.duckdb")
    for argv in (
        ["campaign", "--models", "resnet5", "--dry-run", "--db", db],
        ["recommend", "--model", "resnet5", "--batch-size", "32", "--epochs", "1", "--dataset-images", "1000",
         "--budget-hours", "10", "--db", db],
    ):  # fmt: skip
        said = one_line_error(stash_here(capsys, monkeypatch, *argv))
        assert "(did you mean resnet50, " in said, said


def test_only_a_zoo_name_is_a_zoo_name_never_code_a_stored_run_names() -> None:
    from stash_core.zoo_names import is_zoo_name

    assert is_zoo_name("resnet18") and is_zoo_name(" ResNet18 ")
    code = ("evil.py:make", "this:x", "script:train.py", "resnet18:x", None, 3)
    assert not any(is_zoo_name(ref) for ref in code)
