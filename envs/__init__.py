"""Bundled environments, registered with Gymnasium under ``agentgspo/`` (modules are imported on ``make``)."""

from agentgspo.registry import register

register("agentgspo/Calculator-v0", entry_point="agentgspo.envs.calculator:CalculatorEnv")
register("agentgspo/Math-v0", entry_point="agentgspo.envs.math:MathEnv")
register("agentgspo/Search-v0", entry_point="agentgspo.envs.search:SearchEnv")
register("agentgspo/Code-v0", entry_point="agentgspo.envs.code:CodeEnv")
register("agentgspo/CodeForces-v0", entry_point="agentgspo.envs.codeforces:CodeforcesEnv")
