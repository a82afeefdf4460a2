"""The HTTP API of a remote retriever for `agentgspo/Search-v0`: a FastAPI app over a BM25 index.

``POST /search {"query": str, "k": int}`` -> ``{"results": [{"id", "title", "text", "score"}]}`` (best first, the
same results as the env's embedded ``retriever="bm25"``); ``GET /health`` -> ``{"status": "ok", "documents": N}``.
Launch it with ``agentgspo search-server --corpus PATH --port N`` and pass ``retriever="http://host:N"`` to the
env, so many trainer processes share one index (or a bigger one than fits in each).
"""

from __future__ import annotations

from pathlib import Path

import pydantic

from agentgspo.envs.search import bm25_index

__all__ = ["SearchRequest", "SearchHit", "SearchResponse", "create_app"]


class SearchRequest(pydantic.BaseModel):
    """A query and how many results to return."""

    query: str = pydantic.Field(max_length=2000)
    k: int = pydantic.Field(default=3, ge=1, le=100)


class SearchHit(pydantic.BaseModel):
    """One retrieved document and its BM25 score."""

    id: str
    title: str
    text: str
    score: float


class SearchResponse(pydantic.BaseModel):
    """The results of a query, best first."""

    results: list[SearchHit]


def create_app(corpus: str | Path):
    """The FastAPI app serving the BM25 index of the ``corpus`` file (built now, so errors show at start)."""
    try:
        from fastapi import FastAPI
    except ImportError as exc:
        raise ImportError("the search server needs fastapi and uvicorn: pip install 'agentgspo[server]'") from exc
    index = bm25_index(corpus)
    app = FastAPI(title="agentgspo search server")

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "documents": len(index.docs)}

    @app.post("/search", response_model=SearchResponse)
    def search(request: SearchRequest) -> SearchResponse:
        return SearchResponse(results=[SearchHit(**hit) for hit in index.search(request.query, request.k)])

    return app
