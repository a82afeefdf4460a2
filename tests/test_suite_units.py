"""The suite's units of work under pytest-xdist (tests/conftest.py): a module that starts vLLM servers or engines, or
uses the Ray cluster, is in the shared unit, so no two of them run at once (each holds GBs and both cores)."""

from __future__ import annotations

from pathlib import Path

from conftest import SHARED_UNITS, unit_of_work  # tests/conftest.py

TESTS = Path(__file__).parent
STARTS_VLLM_OR_RAY = ("PolicyServer(", "VLLMPolicy(", "server_command(", "ray_cluster")


def test_every_module_that_starts_vllm_or_ray_is_in_the_shared_unit():
    modules = sorted(TESTS.rglob("test_*.py"))
    heavy = [
        path.relative_to(TESTS.parent).as_posix()
        for path in modules
        if path.name != Path(__file__).name and any(call in path.read_text() for call in STARTS_VLLM_OR_RAY)
    ]
    assert len(heavy) >= 7, heavy  # the search itself still finds them
    assert {path: unit_of_work(path + "::test") for path in heavy} == dict.fromkeys(heavy, "vllm-and-ray")
    assert set(heavy) == set(SHARED_UNITS["vllm-and-ray"]), "update SHARED_UNITS in tests/conftest.py"


def test_other_modules_are_units_of_their_own_and_the_docs_one_unit():
    assert unit_of_work("tests/objective/test_loss.py::test_x[a-b]") == "tests/objective/test_loss.py"
    assert unit_of_work("tests/envs/test_code.py::test_y") == "tests/envs/test_code.py"
    assert unit_of_work("tests/docs/test_site.py::t") == unit_of_work("tests/docs/test_browser.py::t") == "docs"


def test_every_test_module_has_a_name_of_its_own():
    """The test folders have no ``__init__.py``, so pytest imports each module by its file name: a second
    ``test_registry.py`` in another wing fails collection ("import file mismatch")."""
    names: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        names.setdefault(path.name, []).append(path.relative_to(TESTS).as_posix())
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
