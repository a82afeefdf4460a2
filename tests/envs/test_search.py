"""agentgspo/Search-v0: contract, oracle/wrong rewards, EM/F1, BM25 vs the HTTP server, bad data, rollouts."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from servers import serve

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.environments.env_checker import check_env, play
from agentgspo.envs.datafiles import builtin_path
from agentgspo.envs.search import (
    BUILTIN_CORPUS,
    SearchEnv,
    bm25_index,
    exact_match,
    search_oracle,
    search_wrong,
    token_f1,
)
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server_url():
    """The real search server (FastAPI + uvicorn) on a free 127.0.0.1 port, in a thread; stopped after."""
    from agentgspo.envs.search_server import create_app

    with serve(create_app(builtin_path(BUILTIN_CORPUS))) as url:
        yield url


@pytest.mark.parametrize("reward", ["em", "f1"])
def test_check_env_passes(reward):
    check_env(gym.make("agentgspo/Search-v0", reward=reward))


def test_oracle_scores_one_and_wrong_zero_on_every_question():
    env = SearchEnv()
    for seed in range(len(env.rows)):
        gold, terminated, history = play(env, env.oracle, seed=seed)
        assert (gold, terminated) == (1.0, True), history
        assert sum(m["role"] == "tool" for m in history) == 2  # two hops
        assert play(env, env.wrong, seed=seed)[0] == 0.0


def test_questions_need_two_documents_and_the_answer_is_not_in_the_first():
    questions = [json.loads(line) for line in builtin_path("search_questions.jsonl").read_text().splitlines()]
    docs = {d["title"]: d["text"] for d in map(json.loads, builtin_path(BUILTIN_CORPUS).read_text().splitlines())}
    assert len(questions) == 100 and 200 <= len(docs) <= 500
    for q in questions:
        first, bridge = q["hops"]
        assert bridge in docs[first] and q["answer"] in docs[bridge]
        assert q["answer"] not in q["question"]


def test_generator_is_deterministic(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_search_kb.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for name in ("search_kb.jsonl", "search_questions.jsonl"):
        assert (tmp_path / name).read_text() == builtin_path(name).read_text()


def test_em_and_f1_rewards():
    assert exact_match("The Zindzul.", "zindzul") == 1.0 and exact_match("Zindzul town", "Zindzul") == 0.0
    assert token_f1("Zindzul town", "Zindzul") == pytest.approx(2 / 3)
    env = SearchEnv(reward="f1")
    env.reset(seed=0)
    answer = env.answer
    assert env.step(f"<answer>the town {answer}</answer>")[1] == pytest.approx(2 / 3)
    env = SearchEnv(reward="em")
    env.reset(seed=0)
    assert env.step(f"<answer>the town {answer}</answer>")[1] == 0.0
    env.reset(seed=0)
    assert env.step(f"<answer>{answer}</answer>")[1] == 1.0
    env.reset(seed=0)
    assert env.step(answer)[1] == 0.0  # no <answer> tags


def test_bad_options_fail_at_construction():
    with pytest.raises(ValueError, match="reward: expected one of"):
        SearchEnv(reward="bleu")
    with pytest.raises(ValueError, match="retriever: expected 'bm25' or a URL"):
        SearchEnv(retriever="elastic")


def test_bad_question_files_name_the_row_and_missing_files_the_path(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "q?", "answer": "a"}) + "\n" + json.dumps({"question": "q?"}) + "\n")
    with pytest.raises(ValueError, match="row 2: missing field 'answer'"):
        SearchEnv(questions=path)
    with pytest.raises(FileNotFoundError, match="missing_kb.jsonl"):
        SearchEnv(corpus=tmp_path / "missing_kb.jsonl")


def test_index_is_built_once_per_process():
    assert SearchEnv().retriever is SearchEnv().retriever is bm25_index(builtin_path(BUILTIN_CORPUS))


def test_bm25_search_is_thread_safe():
    index = bm25_index(builtin_path(BUILTIN_CORPUS))
    queries = [d["title"] for d in index.docs[:40]]
    expected = [index.search(q, 3) for q in queries]
    results: dict[int, list] = {}

    def worker(i: int) -> None:
        results[i] = [index.search(q, 3) for q in queries]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == expected for i in range(8))


def test_remote_retriever_gives_the_same_results_as_bm25(server_url):
    local = bm25_index(builtin_path(BUILTIN_CORPUS))
    for doc in local.docs[::25]:
        response = httpx.post(server_url + "/search", json={"query": doc["title"], "k": 3}).json()["results"]
        expected = local.search(doc["title"], 3)
        assert [{**r, "score": 0} for r in response] == [{**r, "score": 0} for r in expected]
        assert [r["score"] for r in response] == pytest.approx([r["score"] for r in expected])
    assert httpx.get(server_url + "/health").json() == {"status": "ok", "documents": len(local.docs)}
    remote_env, local_env = SearchEnv(retriever=server_url), SearchEnv()
    for seed in range(8):
        remote = play(remote_env, search_oracle, seed=seed)
        assert remote[0] == 1.0 and remote[2] == play(local_env, search_oracle, seed=seed)[2]


def test_an_unreachable_server_is_a_tool_error_message():
    env = SearchEnv(retriever="http://127.0.0.1:9")
    env.reset(seed=0)
    messages, reward, terminated, _, info = env.step(search_oracle(env.reset(seed=0)[0]))
    assert "Error: search raised" in messages[0]["content"] and not terminated
    assert info["tool_errors"] == {"tool_exception": 1}


def test_the_wrong_policy_scores_zero(renderer):
    wrong = RolloutRunner(
        SearchEnv, ScriptedPolicy(search_wrong, renderer), renderer, RolloutConfig(group_size=1)
    ).run_sync(range(4))
    assert [t.reward for t in wrong] == [0.0] * 4


@pytest.mark.parametrize("missing, extra", [("uvicorn", "server"), ("fastapi", "server"), ("bm25s", "search")])
def test_search_server_without_an_optional_dependency_names_the_fix(missing, extra):
    """A missing package (None in sys.modules makes its import fail) is one line naming the extra, no traceback."""
    code = (
        f"import sys; sys.modules[{missing!r}] = None; from agentgspo.cli import main; "
        "sys.exit(main(['search-server', '--port', '0']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and f"pip install 'agentgspo[{extra}]'" in result.stderr
