"""Held-out splits (agentgspo.envs.splits): every dataset env's train and test splits are disjoint and cover its
rows, training seeds never pose a test row, the training loop trains on "train" and its final evaluation plays only
"test" (summary.json names it), and a final evaluation of training rows is refused."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.envs.splits import TEST_FRACTION, held_out_fraction, held_out_indices
from agentgspo.training.train import TRAIN_SEED_BASE, TrainConfig

# Each dataset env with a cheap constructor (no sandbox run happens at reset).
DATASET_ENVS = {
    "Math-v0": {"sandbox": "none"},
    "Search-v0": {},
    "Code-v0": {},
    "CodeForces-v0": {},  # the five starter problems
}


def _posed(env_id: str, kwargs: dict, **reset) -> str:
    """The user message that ``reset(**reset)`` of the env poses (what identifies the problem)."""
    with gym.make(f"agentgspo/{env_id}", disable_env_checker=True, **kwargs) as env:
        messages, _ = env.reset(**reset)
    return next(m["content"] for m in messages if m["role"] == "user")


def _every_row(env_id: str, kwargs: dict) -> list[str]:
    """What each row of the env made with ``kwargs`` poses, by index."""
    with gym.make(f"agentgspo/{env_id}", disable_env_checker=True, **kwargs) as env:
        size = len(
            next(getattr(env.unwrapped, name) for name in ("rows", "problems", "tasks") if hasattr(env.unwrapped, name))
        )
        return [
            next(m["content"] for m in env.reset(options={"index": i})[0] if m["role"] == "user") for i in range(size)
        ]


@pytest.mark.parametrize("env_id", DATASET_ENVS)
def test_train_and_test_splits_are_disjoint_cover_the_rows_and_training_seeds_pose_no_test_row(env_id):
    kwargs = DATASET_ENVS[env_id]
    every = _every_row(env_id, kwargs)  # split "all", the default: every row, as before
    train, test = _every_row(env_id, {**kwargs, "split": "train"}), _every_row(env_id, {**kwargs, "split": "test"})
    assert train and test and not set(train) & set(test)
    assert sorted(train + test) == sorted(every)
    config = TrainConfig(env_id=f"agentgspo/{env_id}", env_kwargs=kwargs)
    assert config.train_env_kwargs() == {**kwargs, "split": "train"}  # the loop trains on split "train"
    posed = {_posed(env_id, config.train_env_kwargs(), seed=TRAIN_SEED_BASE + k) for k in range(2 * len(every))}
    assert posed == set(train)  # every training row comes up, no test row ever does


def test_a_rows_side_depends_on_its_key_alone_and_both_sides_keep_a_row():
    keys = [f"problem {i}" for i in range(200)]
    held = held_out_indices(keys)
    assert held == {i for i, key in enumerate(keys) if held_out_fraction(key) < TEST_FRACTION}
    assert 20 < len(held) < 60  # about a fifth
    more = held_out_indices(keys + [f"new problem {i}" for i in range(50)])  # rows added: no old row moves
    assert {i for i in more if i < 200} == held
    assert len(held_out_indices(["a", "b"])) == 1  # tiny sets still hold one row out and train on one
    with pytest.raises(ValueError, match="needs two or more"):
        held_out_indices(["only"])


def test_codeforces_held_out_ids_are_its_test_split_and_unknown_ids_name_close_ones():
    assert _every_row("CodeForces-v0", {"held_out": ["9000C"], "split": "test"}) == _every_row(
        "CodeForces-v0", {"exclude": ["9000A", "9000B", "9000D", "9000E"]}
    )
    with pytest.raises(ValueError, match="held_out: no '9000X'.*9000"):
        gym.make("agentgspo/CodeForces-v0", held_out=["9000X"], split="train")


def test_a_final_eval_of_training_rows_is_refused_naming_the_setting_and_the_fix():
    with pytest.raises(ValueError, match=r"final_eval_episodes: .*split 'all'.*leave 'split' out of --env-kwargs"):
        TrainConfig(env_id="agentgspo/Math-v0", env_kwargs={"split": "all"}, final_eval_episodes=4)
    with pytest.raises(ValueError, match="replay training problems"):  # other sandbox, same rows: refused too
        TrainConfig(
            env_id="agentgspo/Math-v0",
            final_eval_env_kwargs={"sandbox": "none", "split": "train"},
            final_eval_episodes=4,
        )
    TrainConfig(env_id="agentgspo/Math-v0", env_kwargs={"split": "all"}, final_eval_episodes=0)  # nothing evaluated
    TrainConfig(  # other data: the user's own held-out set
        env_id="agentgspo/Math-v0",
        env_kwargs={"split": "all"},
        final_eval_env_kwargs={"data_files": "x.jsonl"},
        final_eval_episodes=4,
    )


class _FiniteWithoutSplit(gym.Env):
    held_out_by = None  # a finite task list without a held-out split


def test_a_final_eval_of_a_finite_env_without_a_split_is_refused():
    agentgspo.register("tests/FiniteNoSplit-v0", entry_point=_FiniteWithoutSplit)
    with pytest.raises(ValueError, match="final_eval_episodes: .*no held-out split.*--final-eval-env-kwargs"):
        TrainConfig(env_id="tests/FiniteNoSplit-v0", final_eval_episodes=2)


def test_the_codeforces_recipes_held_out_flag_is_the_envs_held_out_split():
    from recipe_support import recipe_module  # tests/recipe_support.py

    config = recipe_module("codeforces").CODEFORCES.config(env_kwargs={}, held_out=["9000C"], final_eval_episodes=2)
    assert config.train_env_kwargs() == {"held_out": ["9000C"], "split": "train"}
    with pytest.raises(ValueError, match="held_out: --held-out .* differ"):
        recipe_module("codeforces").CODEFORCES.config(env_kwargs={"held_out": ["9000A"]}, held_out=["9000C"])


def _user_messages(path):
    return [
        next(m["content"] for m in json.loads(line)["messages"] if m["role"] == "user")
        for line in path.read_text().splitlines()
    ]


def test_the_final_eval_of_a_run_plays_only_held_out_problems_and_the_summary_names_the_split(tmp_path):
    from agentgspo.training.train import SMOKE, train

    settings = {**SMOKE, "steps": 1, "prompts_per_step": 2, "group_size": 2, "max_new_tokens": 8}
    config = TrainConfig(
        out=str(tmp_path),
        env_id="agentgspo/Math-v0",
        env_kwargs={"sandbox": "none"},
        final_eval_episodes=3,
        **settings,
    )
    summary = train(config)
    final = summary["final_eval"]
    assert (final["split"], final["held_out_by"], final["episodes"]) == ("test", "split", 3)
    assert final["env_kwargs"] == {"sandbox": "none", "split": "test"}
    assert json.loads((tmp_path / "summary.json").read_text())["final_eval"] == final
    test = set(_every_row("Math-v0", {"sandbox": "none", "split": "test"}))
    evaluated = _user_messages(tmp_path / "final_eval" / "sampled.jsonl")
    evaluated += _user_messages(tmp_path / "final_eval" / "greedy.jsonl")
    assert len(evaluated) == 6 and set(evaluated) <= test  # only held-out problems
    trained = _user_messages(tmp_path / "trajectories" / "step_000001_rank0.jsonl")
    assert trained and not set(trained) & test  # and training posed none of them
