"""Evaluating agents on CodeForces-style tasks (``agentgspo eval``, docs/eval.md).

Modules, one job each: ``passk`` (unbiased pass@k), ``rating`` (maximum-likelihood rating fit, CodeElo's
expected-place equation), ``codeelo`` (standings files), ``store`` (results.jsonl, resume), ``agents`` (chat
endpoint and scripted agents), ``runner`` (attempts with a concurrency limit and a progress bar), ``summary``
(the numbers), ``segments`` / ``html`` / ``report`` (report.md and report.html), ``viewer`` (any
trajectories.jsonl as HTML), ``hook`` (periodic eval during training). Nothing here imports the envs: the eval
plays ``agentgspo/CodeForces-v0`` through the registry.
"""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)

#: An eval's time limits (``RolloutConfig`` fields; ``agentgspo eval``'s defaults and ``EvalHook``'s): generous, since
#: a submission judged on many hidden tests is one long env call and a chat API's reasoning turn can take minutes.
EVAL_TIME_LIMITS = {"env_call_timeout_s": 900.0, "env_budget_s": 3600.0, "sampler_timeout_s": 1800.0}
