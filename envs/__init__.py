"""Bundled environments, registered with Gymnasium under ``agentgspo/`` (modules are imported on ``make``).

Each registers the budget an episode needs (measured with the oracle over every built-in task, in the tiny
policy's ids, with room to spare): `agentgspo rollout` and the recipes use it unless given flags.
"""

import agentgspo.environments.interop  # noqa: F401 -- registers server URLs and fleets as env ids (openenv/Remote-v0)
from agentgspo.environments.registry import EnvBudget, register

# Oracle, worst task: 2 turns, 20-id turns, 144 ids in all (the quickstart trains within this budget).
register(
    "agentgspo/Calculator-v0",
    entry_point="agentgspo.envs.calculator:CalculatorEnv",
    budget=EnvBudget(max_turns=3, max_new_tokens=64, max_context=256),
)
# Oracle, worst task: 2 turns, 38-id turns, 378 ids in all.
register(
    "agentgspo/Math-v0",
    entry_point="agentgspo.envs.math:MathEnv",
    budget=EnvBudget(max_turns=6, max_new_tokens=256, max_context=2048),
)
# Oracle, worst task: 3 turns, 35-id turns, 1,092 ids in all (each search returns three passages).
register(
    "agentgspo/Search-v0",
    entry_point="agentgspo.envs.search:SearchEnv",
    budget=EnvBudget(max_turns=6, max_new_tokens=128, max_context=4096),
)
# Oracle, worst task: 2 turns, 423-id turns, 1,248 ids in all.
register(
    "agentgspo/Code-v0",
    entry_point="agentgspo.envs.code:CodeEnv",
    budget=EnvBudget(max_turns=6, max_new_tokens=1024, max_context=4096),
)
# Oracle, worst task: 2 turns, 331-id turns, 1,528 ids in all.
register(
    "agentgspo/CodeForces-v0",
    entry_point="agentgspo.envs.codeforces:CodeforcesEnv",
    budget=EnvBudget(max_turns=6, max_new_tokens=1024, max_context=4096),
)

# Other ecosystems' environments, outside the agentgspo/ namespace (they need arguments: which env to play).
# openenv/Remote-v0: an OpenEnv server (url=...), `agentgspo env-server` included; a bare URL as the env id
# means the same. verifiers/Env-v0: a verifiers environment (docs/envs.md, "Other ecosystems").
register("openenv/Remote-v0", entry_point="agentgspo.environments.interop.openenv_client:OpenEnvEnv")
register("verifiers/Env-v0", entry_point="agentgspo.environments.interop.verifiers_env:VerifiersEnv")
