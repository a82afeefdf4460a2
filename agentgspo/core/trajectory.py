"""The trajectory record: the exact ids a policy played, with a loss mask made where the tokens are made.

Built append-only during a rollout: prompt and environment ids go in with ``loss_mask`` 0 and log-prob 0.0;
sampled ids go in with ``loss_mask`` 1 and the sampler's log-probs. The learner trains on these ids and nothing
else. On disk a trajectory is a :class:`TrajectoryRecord` (pydantic), one JSON object per line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pydantic

from agentgspo.core.routing import RoutingRecord

__all__ = [
    "Ending",
    "ENDINGS",
    "UNCOUNTED_STOPS",
    "sampler_logprobs_mismatch",
    "Trajectory",
    "TrajectoryRecord",
    "write_jsonl",
    "read_jsonl",
]

Message = dict[str, Any]
StopReason = Literal[
    "completed",
    "max_turns",
    "max_tokens",
    "context_overflow",
    "parse_error",
    "env_budget",
    "end_of_text",
    "env_error",
    "env_timeout",
    "judge_error",
    "sampler_error",
    "infra_error",
    "deadline",
]
STOP_REASONS: tuple[str, ...] = StopReason.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Ending:
    """What one way of ending an episode means downstream: the one rule every part follows.

    Attributes:
        trained: the episode enters its group's advantages and the loss (the policy earned this ending).
        counted: eval counts it as an attempt in pass@k and the rating fit (a failed one unless accepted).
        requeue: no one's answer: a run may play the same task again instead (eval replays it on resume).
        meaning: what happened, in one line.
    """

    trained: bool
    counted: bool
    requeue: bool
    meaning: str


#: ONE table: for each stop reason, whether it is trained, counted in pass@k and may be re-queued. The learner
#: (``LearnerConfig.exclude_stop_reasons``), ``summarize`` (the trained population), eval (pass@k) and every later
#: part (asynchronous training, the fleet) read it; none keeps a rule of its own.
ENDINGS: dict[str, Ending] = {
    "completed": Ending(True, True, False, "the env ended the episode (terminated)"),
    "max_turns": Ending(True, True, False, "the turn budget ran out (truncated; reward earned so far kept)"),
    "max_tokens": Ending(True, True, False, "a turn reached max_new_tokens (truncated)"),
    "context_overflow": Ending(
        True, True, False, "the context window is full, or a server refused the prompt's length (truncated)"
    ),
    "parse_error": Ending(True, True, False, "the env ended it after too many unparseable tool calls"),
    "env_budget": Ending(
        True,
        True,
        False,
        "the episode used up its env-time budget (time in env calls, not "
        "time waiting for the sampler): the policy's doing, truncated",
    ),
    "end_of_text": Ending(
        True,
        True,
        False,
        "the policy emitted end-of-text instead of end-of-turn mid-episode: "
        "the env stepped that turn, then the runner ended it (truncated)",
    ),
    "env_error": Ending(False, False, False, "the env raised (a bug in the env or its data; replaying repeats it)"),
    "env_timeout": Ending(False, False, True, "one env call hung past its per-call limit: the machine's fault"),
    "judge_error": Ending(False, False, True, "the env's verifier (checker, interactor, sandbox) failed"),
    "sampler_error": Ending(
        False,
        False,
        True,
        "the sampler failed (an engine error, a server unavailable after retries, a sampler call past its limit)",
    ),
    "infra_error": Ending(
        False, False, True, "infrastructure that is no one's answer died (a sandbox or env server, a worker)"
    ),
    "deadline": Ending(
        False,
        False,
        True,
        "legacy (records before env_budget/env_timeout): a wall-clock episode "
        "deadline that also counted time queued at the sampler",
    ),
}
assert tuple(ENDINGS) == STOP_REASONS, "every stop reason has exactly one row in ENDINGS"
TRAINED_STOPS: tuple[str, ...] = tuple(r for r, e in ENDINGS.items() if e.trained)
EXCLUDED_STOPS: tuple[str, ...] = tuple(r for r, e in ENDINGS.items() if not e.trained)
UNCOUNTED_STOPS: tuple[str, ...] = tuple(r for r, e in ENDINGS.items() if not e.counted)

#: What a backend's log-probs are (``Trajectory.sampling["logprobs"]``, a backend's ``logprob_semantics``):
#: ``"full"``: log_softmax(logits / T) over the whole vocabulary, before top-k/top-p truncation (the HF backend; what
#: the learner computes); ``"truncated"``: renormalised over the top-k/top-p set the token was drawn from (vLLM's
#: ``processed_logprobs``); ``"raw"``: log_softmax(logits), temperature ignored (vLLM's ``raw_logprobs``);
#: ``"none"``: no log-probs (scripted policies, chat APIs: 0.0).
LOGPROB_SEMANTICS = ("full", "truncated", "raw", "none")


def sampler_logprobs_mismatch(sampling: dict[str, Any] | None, temperature: float) -> str | None:
    """Why a trajectory's sampler log-probs differ from what a learner scoring softmax(logits / ``temperature``)
    computes, or ``None`` when they are the same quantity. The one rule for using sampler log-probs as the old
    (or behaviour) policy's:

    - recorded semantics ``"full"`` at the learner's temperature: the same quantity (top-k/top-p do not matter);
    - ``"truncated"``: the same only without truncation (top_p == 1 and top_k off), at the learner's temperature;
    - ``"raw"``: the same only at temperature 1;
    - ``"none"``, or nothing recorded (a record older than ``sampling``): never.

    >>> sampler_logprobs_mismatch({"temperature": 1.0, "top_p": 0.9, "top_k": 0, "logprobs": "full"}, 1.0) is None
    True
    >>> sampler_logprobs_mismatch({"temperature": 1.0, "top_p": 1.0, "top_k": 0, "logprobs": "truncated"}, 1.0)
    >>> sampler_logprobs_mismatch({"temperature": 1.0, "top_p": 0.9, "top_k": 0, "logprobs": "truncated"}, 1.0)[:40]
    'the sampler renormalised its log-probs o'
    """
    if not sampling:
        return "the trajectory does not record its sampling parameters (written before they were recorded)"
    semantics = sampling.get("logprobs")
    if semantics == "none":
        return "the sampler returned no log-probs (a scripted policy or a chat API records 0.0)"
    if semantics in ("full", "truncated") and sampling.get("temperature") != temperature:
        return f"the sampler drew at temperature {sampling.get('temperature')}, the learner scores at T={temperature}"
    if semantics == "raw" and temperature != 1.0:
        return f"the sampler's log-probs ignore temperature (raw logits) but the learner scores at T={temperature}"
    truncated = sampling.get("top_p", 1.0) < 1.0 or (sampling.get("top_k") or 0) > 0
    if semantics == "truncated" and truncated:
        return (
            f"the sampler renormalised its log-probs over the top_p={sampling.get('top_p')} / "
            f"top_k={sampling.get('top_k')} set, the learner scores the whole vocabulary"
        )
    if semantics not in LOGPROB_SEMANTICS:
        return f"unknown log-prob semantics {semantics!r}; expected one of {LOGPROB_SEMANTICS}"
    return None


@dataclass
class Trajectory:
    """One episode as token ids. Mutate only through the ``append_*`` and ``mask_turn`` methods."""

    env_id: str = ""
    seed: int | None = None
    group_id: int = 0
    sample_id: int = 0
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each sampled turn
    turn_versions: list[int] = field(default_factory=list)  # policy version that sampled each turn (its first id)
    #: The version that sampled each turn's last id: greater than ``turn_versions`` when a weight update fell inside
    #: the turn (asynchronous training updates the sampler while episodes are in flight), equal otherwise.
    turn_version_ends: list[int] = field(default_factory=list)
    #: Where the version changed inside each turn, as the sampler knew it (``SampledTurn.version_boundaries``:
    #: ``[(token index in the turn, version), ...]`` from ``(0, turn_versions[k])``); None for a turn sampled by one
    #: version or whose backend did not say where (a server). :meth:`token_versions` rebuilds per-token staleness.
    turn_version_boundaries: list[list[tuple[int, int]] | None] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)  # the reward of the env step that consumed each turn
    routed_experts: dict[str, Any] | None = None  # sampler's top-k experts per token and layer (core.routing)
    #: How the turns were sampled: ``temperature``, ``top_p``, ``top_k`` (0: off) and ``logprobs`` (the backend's
    #: log-prob semantics, :data:`LOGPROB_SEMANTICS`); ``None`` in records written before it was recorded.
    sampling: dict[str, Any] | None = None
    messages: list[Message] = field(default_factory=list)
    reward: float = 0.0
    stop_reason: StopReason = "completed"
    matches_full_render: bool | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def append_forced(self, ids: Sequence[int]) -> None:
        """Append ids the policy did not sample (prompt, environment messages, template glue): mask 0."""
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.sampler_logprobs.extend([0.0] * len(ids))

    def append_sampled(
        self,
        ids: Sequence[int],
        logprobs: Sequence[float],
        policy_version: int = 0,
        policy_version_end: int | None = None,
        version_boundaries: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        """Append one sampled assistant turn: mask 1, with the sampler's log-prob of each id, the versions of
        the policy that sampled its first and its last id (``policy_version_end`` None: the same) and, when the
        version changed inside the turn, where (``SampledTurn.version_boundaries``)."""
        if len(ids) != len(logprobs):
            raise ValueError(f"sampled turn: expected one log-prob per id, got {len(logprobs)} for {len(ids)} ids")
        start = len(self.token_ids)
        self.token_ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.sampler_logprobs.extend(map(float, logprobs))
        self.turn_spans.append((start, len(self.token_ids)))
        self.turn_versions.append(int(policy_version))
        self.turn_version_ends.append(int(policy_version if policy_version_end is None else policy_version_end))
        # Earlier turns given without boundaries (a Trajectory built field by field, as tests do) get None.
        self.turn_version_boundaries.extend([None] * (len(self.turn_spans) - 1 - len(self.turn_version_boundaries)))
        self.turn_version_boundaries.append(
            [(int(index), int(version)) for index, version in version_boundaries] if version_boundaries else None
        )

    def mask_turn(self, turn: int) -> None:
        """Exclude sampled turn ``turn`` from the loss (the env's ``mask`` tool-error policy)."""
        start, end = self.turn_spans[turn]
        self.loss_mask[start:end] = [0] * (end - start)

    def turn_token_versions(self) -> list[list[int] | None]:
        """Per sampled turn, the policy version that sampled each of its ids, rebuilt from the record as
        ``SampledTurn.token_versions`` computes it; None for a turn that spans versions without its boundaries (a
        server's turn, or a record written before boundaries were kept)."""
        boundaries = self.turn_version_boundaries or [None] * len(self.turn_spans)
        return [
            _versions_of_turn(end - start, first, last, known)
            for (start, end), first, last, known in zip(
                self.turn_spans, self.turn_versions, self.turn_version_ends, boundaries
            )
        ]

    def token_versions(self) -> list[int | None]:
        """The version that sampled each id of ``token_ids`` (per-token staleness is the learner's version minus
        it); None for ids no policy sampled (prompt, env replies) and for ids of a turn whose boundaries are
        unknown (:meth:`turn_token_versions`)."""
        versions: list[int | None] = [None] * len(self.token_ids)
        for (start, end), turn in zip(self.turn_spans, self.turn_token_versions()):
            if turn is not None:
                versions[start:end] = turn
        return versions

    @property
    def num_turns(self) -> int:
        """Number of sampled assistant turns."""
        return len(self.turn_spans)

    @property
    def num_sampled_tokens(self) -> int:
        """Tokens the policy sampled and the learner trains on."""
        return sum(self.loss_mask)

    def to_record(self) -> TrajectoryRecord:
        """The validated on-disk form."""
        return TrajectoryRecord(
            env_id=self.env_id,
            seed=self.seed,
            group_id=self.group_id,
            sample_id=self.sample_id,
            token_ids=self.token_ids,
            loss_mask=self.loss_mask,
            sampler_logprobs=self.sampler_logprobs,
            turn_spans=self.turn_spans,
            turn_versions=self.turn_versions,
            turn_version_ends=self.turn_version_ends,
            turn_version_boundaries=self.turn_version_boundaries,
            turn_rewards=self.turn_rewards,
            routed_experts=self.routed_experts,
            sampling=self.sampling,
            messages=self.messages,
            reward=self.reward,
            stop_reason=self.stop_reason,
            num_turns=self.num_turns,
            matches_full_render=self.matches_full_render,
            metadata=self.metadata,
        )


class TrajectoryRecord(pydantic.BaseModel):
    """A trajectory as written to ``trajectories.jsonl``; lengths and masks are validated on load."""

    # inf/NaN are written as JSON's -Infinity/NaN constants (which read_jsonl parses back), not as null.
    model_config = pydantic.ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    env_id: str
    seed: int | None
    group_id: int
    sample_id: int
    token_ids: list[int]
    loss_mask: list[Literal[0, 1]]
    sampler_logprobs: list[float]
    turn_spans: list[tuple[int, int]]
    #: The policy version that sampled each turn; records written before versions existed read as all 0.
    turn_versions: list[int] = []
    #: The version that sampled each turn's last id (see :attr:`Trajectory.turn_version_ends`); records written
    #: before it existed read as their ``turn_versions``.
    turn_version_ends: list[int] = []
    #: Where the version changed inside each turn (see :attr:`Trajectory.turn_version_boundaries`); records written
    #: before it existed read as None per turn (per-token versions unknown only for turns that span versions).
    turn_version_boundaries: list[list[tuple[int, int]] | None] = []
    #: The reward of the ``step`` that consumed each turn (0.0 for a turn no step consumed); records written before
    #: per-turn rewards existed read as [] (per-turn credit then refuses them).
    turn_rewards: list[float] = []
    #: The sampler's expert choices ([T, L, k], :mod:`agentgspo.core.routing`); None when not recorded.
    routed_experts: RoutingRecord | None = None
    #: See :attr:`Trajectory.sampling`; ``None`` in records written before it existed.
    sampling: dict[str, Any] | None = None
    messages: list[dict[str, Any]]
    reward: float
    stop_reason: StopReason
    num_turns: int
    matches_full_render: bool | None
    metadata: dict[str, Any]

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> TrajectoryRecord:
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.sampler_logprobs) != n:
            raise ValueError(
                f"token_ids, loss_mask and sampler_logprobs must have equal lengths, got {n}, "
                f"{len(self.loss_mask)}, {len(self.sampler_logprobs)}"
            )
        for start, end in self.turn_spans:
            if not 0 <= start <= end <= n:
                raise ValueError(f"turn span ({start}, {end}) is outside the {n} token ids")
        if not self.turn_versions:  # an old record: no versions were written
            self.turn_versions = [0] * len(self.turn_spans)
        if not self.turn_version_ends:
            self.turn_version_ends = list(self.turn_versions)
        for name, versions in (("turn_versions", self.turn_versions), ("turn_version_ends", self.turn_version_ends)):
            if len(versions) != len(self.turn_spans):
                raise ValueError(f"{name}: expected one per turn span ({len(self.turn_spans)}), got {len(versions)}")
        if any(end < start for start, end in zip(self.turn_versions, self.turn_version_ends)):
            raise ValueError("turn_version_ends: a turn cannot end on an older version than it started")
        self._check_version_boundaries()
        if self.turn_rewards and len(self.turn_rewards) != len(self.turn_spans):
            raise ValueError(
                f"turn_rewards: expected one per turn span ({len(self.turn_spans)}), got {len(self.turn_rewards)}"
            )
        if self.routed_experts is not None and self.routed_experts.shape[0] > n:
            raise ValueError(
                f"routed_experts: expected at most one row per token id ({n}), got shape {self.routed_experts.shape}"
            )
        return self

    def _check_version_boundaries(self) -> None:
        """One entry per turn (None each in older records); each list starts at token 0 with the turn's first
        version, ends on its last, with token indices increasing inside the turn."""
        if not self.turn_version_boundaries:
            self.turn_version_boundaries = [None] * len(self.turn_spans)
        if len(self.turn_version_boundaries) != len(self.turn_spans):
            raise ValueError(
                f"turn_version_boundaries: expected one per turn span ({len(self.turn_spans)}), got "
                f"{len(self.turn_version_boundaries)} (None for a turn without boundaries)"
            )
        for k, boundaries in enumerate(self.turn_version_boundaries):
            if not boundaries:
                continue
            (start, end), first, last = self.turn_spans[k], self.turn_versions[k], self.turn_version_ends[k]
            where = f"turn_version_boundaries[{k}] = {boundaries}"
            if boundaries[0] != (0, first):
                raise ValueError(f"{where}: must start at token 0 with the turn's first version {first}")
            if boundaries[-1][1] != last:
                raise ValueError(f"{where}: must end on the turn's last version {last}")
            starts = [index for index, _ in boundaries]
            if any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= end - start:
                raise ValueError(f"{where}: token indices must increase inside the turn's {end - start} ids")

    def to_trajectory(self) -> Trajectory:
        """Back to the in-memory form."""
        data = self.model_dump(exclude={"num_turns"})
        data["turn_spans"] = [tuple(span) for span in data["turn_spans"]]
        if data["routed_experts"] is not None:
            data["routed_experts"]["shape"] = list(data["routed_experts"]["shape"])  # as encode_routing writes it
        data["turn_version_boundaries"] = [
            None if turn is None else [tuple(b) for b in turn] for turn in data["turn_version_boundaries"]
        ]
        return Trajectory(**data)


def _versions_of_turn(
    length: int, first: int, last: int, boundaries: Sequence[tuple[int, int]] | None
) -> list[int] | None:
    """The version of each of a turn's ``length`` ids: from its boundaries when known, ``first`` throughout when it
    did not span versions (``first == last``), else None (``SampledTurn.token_versions``'s rule).

    >>> _versions_of_turn(3, 2, 3, [(0, 2), (1, 3)]), _versions_of_turn(2, 5, 5, None), _versions_of_turn(2, 5, 6, None)
    ([2, 3, 3], [5, 5], None)
    """
    if boundaries:
        ends = [start for start, _ in boundaries[1:]] + [length]
        return [version for (start, version), end in zip(boundaries, ends) for _ in range(start, end)]
    return [first] * length if first == last else None


def write_jsonl(trajectories: Iterable[Trajectory], path: str | Path, *, append: bool = False) -> int:
    """Write trajectories one JSON object per line; returns how many were written."""
    count = 0
    with open(path, "a" if append else "w") as f:
        for trajectory in trajectories:
            f.write(trajectory.to_record().model_dump_json() + "\n")
            count += 1
    return count


def read_jsonl(path: str | Path) -> list[Trajectory]:
    """Read and validate ``trajectories.jsonl``; a bad line is an error naming its line number."""
    trajectories = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                trajectories.append(TrajectoryRecord.model_validate(json.loads(line)).to_trajectory())
            except (ValueError, pydantic.ValidationError) as exc:
                raise ValueError(f"{path}:{number}: not a valid trajectory record: {exc}") from exc
    return trajectories
