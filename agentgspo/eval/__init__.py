"""Evaluating agents on CodeForces-style tasks (``agentgspo eval``, docs/eval.md).

Modules, one job each: ``passk`` (unbiased pass@k), ``rating`` (maximum-likelihood rating fit, CodeElo's
expected-place equation), ``codeelo`` (standings files), ``store`` (results.jsonl, resume), ``agents`` (chat
endpoint and scripted agents), ``runner`` (attempts with a concurrency limit and a progress bar), ``summary``
(the numbers), ``segments`` / ``html`` / ``report`` (report.md and report.html), ``viewer`` (any
trajectories.jsonl as HTML), ``hook`` (periodic eval during training). Nothing here imports the envs: the eval
plays ``agentgspo/CodeForces-v0`` through the registry.
"""
