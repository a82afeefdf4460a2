"""A test env whose step hangs for some seeds: the fault the rollout runner's ``env_call_timeout_s`` ends as
``env_timeout`` (tests/training/test_async_faults.py).

Registered on import as ``tests/Hanging-v0`` (not in the agentgspo namespace: the suite's every-bundled-env tests
enumerate that one); a recipe subprocess makes it with ``--env-id hanging_env:tests/Hanging-v0`` (tests/ is on its
PYTHONPATH). One turn, rewarded as tests/parity_env.py's task: 1 when the reply has an even number of characters.
The env's answer to the turn (``step``, or ``on_truncation`` when the turn was cut at max_new_tokens and never
stepped) hangs for the GSPO prompts (seeds from ``TRAIN_SEED_BASE``; the warm start's demonstrations and the final
evaluation's held-out seeds, played without the per-call limit, never hang) whose seed is a multiple of
``HANG_EVERY``: for ``HANG_SECONDS``, far
past any per-call limit the tests set, unless the env is closed first (the runner closes an env whose call it
abandoned, which releases the sleeping worker thread instead of leaving it asleep until the process exits).
"""

import threading

from agentgspo import ChatEnv, register
from agentgspo.training.train import DEMO_SEED_BASE, TRAIN_SEED_BASE

ENV_ID = "tests/Hanging-v0"
HANG_EVERY = 3
HANG_SECONDS = 120.0


def hangs(seed: int) -> bool:
    """Whether the env's answer in the episode of ``seed`` hangs."""
    return TRAIN_SEED_BASE <= seed < DEMO_SEED_BASE and seed % HANG_EVERY == 0


class HangingEnv(ChatEnv):
    """One turn; its answer hangs for the seeds :func:`hangs` names (until :meth:`close`), and comes otherwise. The
    warm start's demonstrator: ``oracle`` (an even reply) or ``wrong``."""

    oracle = staticmethod(lambda messages: "ok")
    wrong = staticmethod(lambda messages: "odd")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed, self.closed = None, threading.Event()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed = seed
        return [{"role": "user", "content": f"Say something ({seed})."}], {}

    def hang(self) -> None:
        if hangs(self.seed):
            self.closed.wait(HANG_SECONDS)  # a hung machine; close() (the runner's, after its timeout) ends it

    def step(self, action):
        self.hang()
        return super().step(action)

    def on_truncation(self, reason):
        self.hang()
        return super().on_truncation(reason)

    def respond(self, action):
        return [], float(len(action.text) % 2 == 0), True, False, {}

    def close(self):
        self.closed.set()
        super().close()


register(ENV_ID, entry_point=HangingEnv)
