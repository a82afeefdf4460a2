"""The fleet: the control plane that places, starts, probes, restarts and describes sampler replicas (vLLM servers),
sandbox servers and env servers, on this machine or on a Ray cluster (``agentgspo fleet up|status|down FILE``).

The fleet file (``spec``), the manifest of live URLs that clients read (``manifest``: its module docstring is the
schema), the health probes (``probes``), the two launchers (``local``, ``ray_launcher``), the process keeper that
takes a part's whole process group down with it (``keeper``) and the supervisor (``supervisor``). Parts are started
by their own commands (``agentgspo serve-policy``, ``sandbox-server``, ``env-server``) and probed over HTTP: this wing
imports nothing of the others (docs/fleet.md).
"""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
