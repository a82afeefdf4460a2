"""The scripted agents: which shipped solution each submits."""

from __future__ import annotations

from agentgspo.eval.agents import ShippedSolutionAgent, load_renderer


def test_the_wrong_agent_cycles_through_the_shipped_wrong_solutions():
    class Task:
        statement, references = "S", {"cpp": "int main(){}", "py": "print(1)"}
        wrong = [{"name": "w1", "lang": "py", "code": "1"}, {"name": "w2", "lang": "cpp", "code": "2"}]

    renderer = load_renderer("tiny")
    wrong = ShippedSolutionAgent("wrong", [Task()], renderer)
    assert [wrong.solution(Task(), s)["name"] for s in range(3)] == ["w1", "w2", "w1"]
    assert ShippedSolutionAgent("reference", [Task()], renderer).solution(Task(), 0)["lang"] == "cpp"
    Task.references = {"py": "print(1)"}
    assert ShippedSolutionAgent("reference", [Task()], renderer).solution(Task(), 0)["lang"] == "py"
