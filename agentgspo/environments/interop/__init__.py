"""Environments that travel: other ecosystems' environments played here, ours served to their trainers.

- :mod:`~agentgspo.environments.interop.openenv_client`: an OpenEnv server (any URL, ``agentgspo env-server``
  included) played as a chat env over OpenEnv's WebSocket protocol.
- :mod:`~agentgspo.environments.interop.openenv_server`: any registered env served as an OpenEnv environment
  (``create_app``), which ``agentgspo env-server`` runs.
- :mod:`~agentgspo.environments.interop.verifiers_env`: a verifiers environment played as a chat env
  (``verifiers/Env-v0``; its machinery in :mod:`~agentgspo.environments.interop.verifiers_host`).
- :mod:`~agentgspo.environments.interop.verifiers_export`: any registered env as a verifiers environment, which
  ``vf-eval agentgspo-verifiers`` evaluates.
- :mod:`~agentgspo.environments.interop.openai_chat`: our messages and ``<tool_call>`` text as OpenAI chat
  messages and ``tool_calls``, and back.
- :mod:`~agentgspo.environments.interop.trl_env`: a registered env as TRL's ``environment_factory`` class.

What maps and what does not, per adapter: ``docs/envs.md``, "Other ecosystems".

A server URL or a fleet's env servers given as an env id plays ``openenv/Remote-v0``: this package registers that
form of id with the env registry (``register_id_resolver``), whose resolver the client module holds.
"""

from agentgspo.environments.registry import register_id_resolver

#: env ids that name a server rather than a registration.
REMOTE_SCHEMES = ("http://", "https://", "ws://", "wss://")
#: an env id naming a fleet's env servers: ``fleet:MANIFEST`` or ``fleet:MANIFEST#GROUP``.
FLEET_PREFIX = "fleet:"

register_id_resolver((*REMOTE_SCHEMES, FLEET_PREFIX), "agentgspo.environments.interop.openenv_client:REMOTE_IDS")
