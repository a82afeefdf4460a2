"""Generate the synthetic knowledge base and 2-hop questions of `agentgspo/Search-v0`.

Every entity is invented (names are built from syllables), so a model cannot know the answers and must search.
The world: countries; towns, each in one country; people, each born in one town in one year; companies, each
founded by one person and headquartered in one town. One short document per entity. Each question needs two
documents: the first names a bridge entity (a town or a founder), the second holds the answer.

The output is deterministic for a seed (stdlib ``random.Random``), so the shipped files can be regenerated:

    python scripts/make_search_kb.py                # writes envs/data/search_kb.jsonl, search_questions.jsonl
    python scripts/make_search_kb.py --seed 1 --out /tmp/kb --questions 200

Document texts follow fixed sentence templates; `agentgspo.envs.search`'s oracle reads the bridge entity from
them, so change the templates there too if you change them here.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "tr", "sh"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ei"]
CODAS = ["", "", "n", "r", "s", "l", "th", "m", "sk", "nd"]
TRADES = [
    "ceramics",
    "river shipping",
    "glassware",
    "clockmaking",
    "textiles",
    "printing",
    "salt mining",
    "bicycles",
    "paper",
    "organ building",
    "rope",
    "lenses",
    "tea trading",
    "ink",
    "bells",
]
JOBS = [
    "engineer",
    "botanist",
    "merchant",
    "cartographer",
    "chemist",
    "architect",
    "weaver",
    "composer",
    "shipwright",
    "teacher",
    "surveyor",
    "printer",
]
LANDSCAPES = [
    "on a wide river",
    "in a mountain valley",
    "on the coast",
    "on a high plateau",
    "beside a lake",
    "among vineyards",
    "in a forest",
    "at a crossroads",
]
SUFFIXES = ["Works", "Company", "Guild", "& Sons", "Trading House", "Manufactory"]


def make_name(rng: random.Random, syllables: int, taken: set[str]) -> str:
    """A new capitalised invented word of ``syllables`` syllables, not in ``taken`` (which it joins)."""
    while True:
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables))
        word = word.capitalize()
        if word not in taken and len(word) >= 4:
            taken.add(word)
            return word


def build_world(
    seed: int, n_countries: int = 15, n_towns: int = 60, n_people: int = 160, n_companies: int = 60
) -> dict[str, list[dict]]:
    """The invented entities and their relations, as lists of dicts per kind."""
    rng = random.Random(seed)
    taken: set[str] = set()
    countries = [{"name": make_name(rng, 3, taken)} for _ in range(n_countries)]
    towns = [
        {
            "name": make_name(rng, 2, taken),
            "country": rng.choice(countries)["name"],
            "landscape": rng.choice(LANDSCAPES),
            "population": rng.randrange(2_000, 400_000, 100),
        }
        for _ in range(n_towns)
    ]
    people = [
        {
            "name": f"{make_name(rng, 2, taken)} {make_name(rng, 2, taken)}",
            "town": rng.choice(towns)["name"],
            "year": rng.randrange(1850, 1966),
            "job": rng.choice(JOBS),
        }
        for _ in range(n_people)
    ]
    founders = rng.sample(people, n_companies)
    companies = [
        {
            "name": f"{make_name(rng, 2, taken)} {rng.choice(SUFFIXES)}",
            "founder": founder["name"],
            "town": rng.choice(towns)["name"],
            "trade": rng.choice(TRADES),
            "year": founder["year"] + rng.randrange(22, 50),
        }
        for founder in founders
    ]
    return {"countries": countries, "towns": towns, "people": people, "companies": companies}


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def documents(world: dict[str, list[dict]]) -> list[dict]:
    """One document per entity: ``{"id", "title", "text"}``, texts from fixed templates."""
    towns_of: dict[str, list[str]] = {}
    for town in world["towns"]:
        towns_of.setdefault(town["country"], []).append(town["name"])
    docs = []
    for c in world["countries"]:
        listed = ", ".join(sorted(towns_of.get(c["name"], []))[:4]) or "no large towns"
        docs.append({"title": c["name"], "text": f"{c['name']} is a small country. Its towns include {listed}."})
    for t in world["towns"]:
        docs.append(
            {
                "title": t["name"],
                "text": f"{t['name']} is a town in the country of {t['country']}, "
                f"{t['landscape']}. It has about {t['population']} inhabitants.",
            }
        )
    for p in world["people"]:
        docs.append(
            {
                "title": p["name"],
                "text": f"{p['name']} was {_article(p['job'])} {p['job']} born in the town of "
                f"{p['town']} in the year {p['year']}.",
            }
        )
    for co in world["companies"]:
        docs.append(
            {
                "title": co["name"],
                "text": f"{co['name']} is {_article(co['trade'])} {co['trade']} firm "
                f"founded in {co['year']} by {co['founder']}. It is headquartered in "
                f"the town of {co['town']}.",
            }
        )
    return [{"id": f"doc{i:04d}", **doc} for i, doc in enumerate(docs)]


def questions(world: dict[str, list[dict]], n: int, seed: int) -> list[dict]:
    """``n`` 2-hop questions, four kinds in turn: ``{"id", "question", "answer", "kind", "hops"}``."""
    rng = random.Random(seed + 1)
    town = {t["name"]: t for t in world["towns"]}
    person = {p["name"]: p for p in world["people"]}
    people = rng.sample(world["people"], len(world["people"]))
    companies = [rng.sample(world["companies"], len(world["companies"])) for _ in range(3)]
    out = []
    for i in range(n):
        kind = ("birth_country", "hq_country", "founder_town", "founder_year")[i % 4]
        if kind == "birth_country":
            p = people[i // 4]
            q, a, hops = f"In which country was {p['name']} born?", town[p["town"]]["country"], [p["name"], p["town"]]
        else:
            co = companies[i % 4 - 1][i // 4 % len(world["companies"])]
            founder = person[co["founder"]]
            if kind == "hq_country":
                q, a, hops = (
                    f"In which country is {co['name']} headquartered?",
                    town[co["town"]]["country"],
                    [co["name"], co["town"]],
                )
            elif kind == "founder_town":
                q, a, hops = (
                    f"In which town was the founder of {co['name']} born?",
                    founder["town"],
                    [co["name"], founder["name"]],
                )
            else:
                q, a, hops = (
                    f"In what year was the founder of {co['name']} born?",
                    str(founder["year"]),
                    [co["name"], founder["name"]],
                )
        out.append({"id": f"q{i:03d}", "question": q, "answer": a, "kind": kind, "hops": hops})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` as JSON lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the invented world (default 0)")
    parser.add_argument("--questions", type=int, default=100, help="number of questions (default 100)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "envs" / "data",
        help="folder for search_kb.jsonl and search_questions.jsonl",
    )
    args = parser.parse_args(argv)
    world = build_world(args.seed)
    docs = documents(world)
    qs = questions(world, args.questions, args.seed)
    write_jsonl(args.out / "search_kb.jsonl", docs)
    write_jsonl(args.out / "search_questions.jsonl", qs)
    print(f"wrote {len(docs)} documents and {len(qs)} questions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
