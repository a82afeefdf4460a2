"""The fleet: the control plane that places, starts, probes, restarts and describes sampler replicas (vLLM servers),
sandbox servers and env servers, on this machine or on a Ray cluster (``agentgspo fleet up|status|down FILE``), and
runs a whole run with it: the fleet up, the learner's command, the fleet down (``agentgspo fleet run|submit``).

The fleet file (``spec``), the manifest of live URLs that clients read (``agentgspo.core.fleet_manifest``: its module
docstring is the schema), the health probes (``probes``), the two launchers (``local``, ``ray_launcher``), the process
keeper that takes a part's whole process group down with it (``keeper``), the supervisor (``supervisor``), ``fleet
up``, ``status`` and ``down`` (``control``), and ``fleet run`` and ``submit`` (``job``). Parts are started by their
own commands (``agentgspo serve-policy``, ``sandbox-server``, ``env-server``) and probed over HTTP: this wing imports
nothing of the others but the core (docs/fleet.md).
"""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
