"""`agentgspo/Search-v0`: 2-hop questions about an invented world, answered with a ``search`` tool.

The knowledge base (``envs/data/search_kb.jsonl``, ~300 short documents) and its questions
(``envs/data/search_questions.jsonl``, 100) are made by ``scripts/make_search_kb.py`` with a fixed seed: people,
towns, countries and companies that do not exist, so the model cannot know the answers and must search twice (the
first document names a bridge entity, the second holds the answer). The final answer is ``<answer>...</answer>``.

Retrieval: ``retriever="bm25"`` searches a BM25 index (``bm25s``) built once per process per corpus file;
``retriever="http://host:port"`` asks a remote retriever (``agentgspo search-server --corpus PATH --port N``) with
the same API, ``POST /search {"query", "k"} -> {"results": [{"id", "title", "text", "score"}]}``.

Reward (``reward="em"`` or ``"f1"``) compares the normalised answer with the gold one: lowercase, punctuation and
the articles a/an/the removed, whitespace collapsed, as in the SQuAD v1.1 evaluation script (Rajpurkar et al.
2016, https://rajpurkar.github.io/SQuAD-explorer/); ``em`` is 1.0 on an exact match, ``f1`` the token-level F1.

Held-out split (``split=``, :mod:`agentgspo.envs.splits`): ``"all"`` (default) asks every question, ``"train"`` all
but the held-out ones, ``"test"`` only those. A question is held out when the SHA-256 of its text falls in the
lowest ``TEST_FRACTION`` (0.2) of hash values (each side keeps at least one), so its side never changes when
questions are added. The knowledge base is shared by both sides (it is the world, not the task). The training loop
trains on ``"train"`` and evaluates on ``"test"``.
"""

from __future__ import annotations

import re
import string
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from agentgspo.environments.env import Action, ChatEnv, Message
from agentgspo.envs.datafiles import LoadedOnce, builtin_path, load_rows, resolved_path, task_index
from agentgspo.envs.splits import split_indices
from agentgspo.environments.tool_calls import ToolCall

__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "BM25Index",
    "load_corpus",
    "bm25_index",
    "HTTPRetriever",
    "make_retriever",
    "format_results",
    "search_oracle",
    "search_wrong",
    "SearchEnv",
]

SYSTEM_PROMPT = (
    "Answer the question. The facts are only in the knowledge base: use the search tool (you may search several "
    "times), then reply <answer>...</answer> with just the answer."
)
BUILTIN_CORPUS = "search_kb.jsonl"
BUILTIN_QUESTIONS = "search_questions.jsonl"
REWARDS = ("em", "f1")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# ----------------------------------------------------------------------------------------------- reward


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace (SQuAD v1.1 ``normalize_answer``).

    >>> normalize_answer("  The Town of  Zindzul! ")
    'town of zindzul'
    """
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0.

    >>> exact_match("the Troskkungusk.", "Troskkungusk")
    1.0
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised answers: ``2PR / (P + R)`` over the multiset of shared tokens.

    >>> token_f1("Stidroum and Sons", "Stidroum & Sons")
    0.8
    >>> token_f1("", "x")
    0.0
    """
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(expected)
    return 2 * precision * recall / (precision + recall)


# ----------------------------------------------------------------------------------------------- retrievers


class BM25Index:
    """A BM25 index (``bm25s``, Lucene scoring, English stopwords) over documents ``{"id", "title", "text"}``.

    ``search`` is thread-safe (a lock around ``bm25s``, whose retrieve is not documented as such; it takes ~1 ms).
    """

    def __init__(self, docs: list[dict[str, str]]):
        try:
            import bm25s
        except ImportError as exc:
            raise ImportError("the bm25 retriever needs bm25s: pip install 'agentgspo[search]'") from exc
        self.docs = docs
        self._bm25s = bm25s
        self._retriever = bm25s.BM25()
        corpus = [f"{doc['title']}\n{doc['text']}" for doc in docs]
        self._retriever.index(bm25s.tokenize(corpus, show_progress=False), show_progress=False)
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 3) -> list[dict[str, Any]]:
        """The ``k`` best documents for ``query``: ``[{"id", "title", "text", "score"}]``, best first."""
        k = max(1, min(k, len(self.docs)))
        with self._lock:
            tokens = self._bm25s.tokenize([query], return_ids=False, show_progress=False)
            if not tokens[0]:
                return []
            indices, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [{**self.docs[int(i)], "score": float(s)} for i, s in zip(indices[0], scores[0]) if s > 0]


_bm25_indexes: LoadedOnce[str, BM25Index] = LoadedOnce()


def load_corpus(path: str | Path) -> list[dict[str, str]]:
    """The documents of a corpus file (fields ``id``, ``title``, ``text``), read once per process."""
    return load_rows(path, ("id", "title", "text"))


def bm25_index(path: str | Path) -> BM25Index:
    """The BM25 index of the corpus file ``path``, built once per process (thread-safe)."""
    key = str(resolved_path(path))
    return _bm25_indexes.get(key, lambda: BM25Index(load_corpus(key)))


class HTTPRetriever:
    """A remote retriever speaking the ``search-server`` API; one pooled ``httpx.Client`` per URL, shared."""

    def __init__(self, base_url: str, timeout_s: float = 10.0):
        import httpx

        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def search(self, query: str, k: int = 3) -> list[dict[str, Any]]:
        """``POST /search``; raises on HTTP errors (the tool turns them into a tool message)."""
        response = self._client.post("/search", json={"query": query, "k": k})
        response.raise_for_status()
        return response.json()["results"]


_http_retrievers: LoadedOnce[str, HTTPRetriever] = LoadedOnce()


def make_retriever(retriever: str, corpus: str | Path) -> BM25Index | HTTPRetriever:
    """``"bm25"`` (the local index of ``corpus``) or an ``http(s)://`` URL of a search server."""
    if retriever == "bm25":
        return bm25_index(corpus)
    if retriever.startswith(("http://", "https://")):
        return _http_retrievers.get(retriever, lambda: HTTPRetriever(retriever))
    raise ValueError(f"retriever: expected 'bm25' or a URL like 'http://127.0.0.1:8000', got {retriever!r}")


def format_results(results: list[dict[str, Any]]) -> str:
    """The text the model reads: ``[n] Title`` then the document's text, per result."""
    if not results:
        return "No results."
    return "\n\n".join(f"[{n}] {r['title']}\n{r['text']}" for n, r in enumerate(results, start=1))


# ----------------------------------------------------------------------------------------------- policies

# The sentence templates of scripts/make_search_kb.py, read by the oracle: question -> (first entity, bridge).
_QUESTIONS = [
    (
        re.compile(r"In which country was (.+) born\?"),
        re.compile(r"born in the town of (\w+)"),
        re.compile(r"in the country of (\w+)"),
    ),
    (
        re.compile(r"In which country is (.+) headquartered\?"),
        re.compile(r"headquartered in the town of (\w+)"),
        re.compile(r"in the country of (\w+)"),
    ),
    (
        re.compile(r"In which town was the founder of (.+) born\?"),
        re.compile(r"\bby (\w+ \w+)\."),
        re.compile(r"born in the town of (\w+)"),
    ),
    (
        re.compile(r"In what year was the founder of (.+) born\?"),
        re.compile(r"\bby (\w+ \w+)\."),
        re.compile(r"in the year (\d+)"),
    ),
]


def _document(tool_text: str, title: str) -> str:
    """The text of the result titled ``title`` in a search tool message ('' when absent)."""
    for block in tool_text.split("\n\n"):
        head, _, body = block.partition("\n")
        if re.sub(r"^\[\d+\] ", "", head) == title:
            return body
    return ""


def _search_call(query: str) -> str:
    return ToolCall("search", {"query": query}).to_text()


def search_oracle(messages: list[Message]) -> str:
    """Expert turns: search the question's entity, read the bridge entity, search it, read and give the answer."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    results = [m["content"] for m in messages if m["role"] == "tool"]
    for asks, bridge_pattern, answer_pattern in _QUESTIONS:
        match = asks.search(question)
        if match is None:
            continue
        entity = match.group(1)
        if not results:
            return _search_call(entity)
        bridge = bridge_pattern.search(_document(results[0], entity))
        if bridge is None:
            return "<answer>unknown</answer>"
        if len(results) == 1:
            return _search_call(bridge.group(1))
        answer = answer_pattern.search(_document(results[1], bridge.group(1)))
        return f"<answer>{answer.group(1) if answer else 'unknown'}</answer>"
    return "<answer>unknown</answer>"


def search_wrong(messages: list[Message]) -> str:
    """A policy that answers at once, without searching, with a name that is not in the knowledge base."""
    return "<answer>Atlantis</answer>"


# ----------------------------------------------------------------------------------------------- env


class SearchEnv(ChatEnv):
    """2-hop questions over a knowledge base, a ``search`` tool, ``<answer>`` scored by EM or F1.

    Args:
        retriever: ``"bm25"`` (local index of ``corpus``) or the URL of a ``search-server``.
        reward: ``"em"`` (exact match) or ``"f1"`` (token F1) of the normalised answer.
        corpus: documents file (``id``, ``title``, ``text``); ``None`` is the built-in knowledge base.
        questions: questions file (``question``, ``answer``); ``None`` is the built-in 100 questions.
        top_k: results per search.
        split: ``"all"`` questions, ``"train"`` (all but the held-out ones) or ``"test"`` (only the held-out ones;
            the rule is in the module docstring).
        **chat_env_kwargs: ``tool_error_policy``, ``tool_error_penalty``, ``max_parse_errors`` of :class:`ChatEnv`.
    """

    oracle = staticmethod(search_oracle)
    wrong = staticmethod(search_wrong)
    held_out_by = "split"  # a finite question set: its `split` keyword holds questions out
    task_keywords = ("questions",)  # they choose the tasks

    def __init__(
        self,
        *,
        retriever: str = "bm25",
        reward: str = "em",
        corpus: str | Path | None = None,
        questions: str | Path | None = None,
        top_k: int = 3,
        split: str = "all",
        **chat_env_kwargs: Any,
    ):
        if reward not in REWARDS:
            raise ValueError(f"reward: expected one of {REWARDS}, got {reward!r}")
        if top_k < 1:
            raise ValueError(f"top_k: expected >= 1, got {top_k}")
        path = builtin_path(BUILTIN_QUESTIONS) if questions is None else questions
        rows = load_rows(path, ("question", "answer"))
        chosen = split_indices(rows, split, lambda row: row["question"], key_name="question", what=f"{path}")
        self.rows = rows if split == "all" else [rows[i] for i in chosen]
        self.retriever = make_retriever(retriever, builtin_path(BUILTIN_CORPUS) if corpus is None else corpus)
        self.score = exact_match if reward == "em" else token_f1
        retriever_ = self.retriever

        def search(query: str) -> str:
            """Search the knowledge base; returns the best matching documents with their titles.

            Args:
                query: a few keywords, e.g. a name.
            """
            return format_results(retriever_.search(query, top_k))

        super().__init__(tools=[search], **chat_env_kwargs)
        self.question = ""
        self.answer = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Ask question ``options["index"]``, else ``seed % len(rows)``, else a random one."""
        super().reset(seed=seed)
        index = task_index(seed, options, len(self.rows), self.np_random)
        self.question, self.answer = self.rows[index]["question"], self.rows[index]["answer"]
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": self.question}]
        return messages, {"index": index, "answer": self.answer}

    def respond(self, action: Action):
        """Score the ``<answer>`` of a turn without tool calls (0.0 without one) and end the episode."""
        match = _ANSWER.search(action.content)
        reward = self.score(match.group(1), self.answer) if match else 0.0
        return [], float(reward), True, False, {"answered": match is not None, "correct": reward == 1.0}
