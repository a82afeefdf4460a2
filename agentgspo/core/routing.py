"""The routing record: an MoE sampler's top-k experts per token and layer, as a trajectory stores them.

In memory the choices are a ``[T, L, k]`` integer array (T token ids, L MoE layers, k experts per token), with
:data:`NOT_RECORDED` where the sampler never fed a token (a turn's last sampled id). On disk (``routed_experts`` in
``trajectories.jsonl``) that array is one JSON object::

    {"shape": [T, L, k], "dtype": "uint8" | "int16", "data": base64 of the array's little-endian bytes}

``uint8`` when every id fits below 255 (255 then stands for :data:`NOT_RECORDED`), else ``int16`` (-1 stays -1).
This module is the format and its checks, without torch; the conversions to and from tensors, and the replay
itself, are :mod:`agentgspo.models.routing_replay` (``encode_routing``, ``decode_routing``, ``merge_routing``).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Literal

import pydantic

__all__ = ["NOT_RECORDED", "UINT8_NOT_RECORDED", "STORAGE", "RoutingRecord"]

#: An id position the sampler did not route (it never fed that token).
NOT_RECORDED = -1
#: :data:`NOT_RECORDED` as stored in a ``uint8`` record.
UINT8_NOT_RECORDED = 255
#: Each stored dtype's little-endian array type (numpy's spelling) and its bytes per id.
STORAGE: dict[str, tuple[str, int]] = {"uint8": ("<u1", 1), "int16": ("<i2", 2)}


class RoutingRecord(pydantic.BaseModel):
    """A ``routed_experts`` record as read from disk: its data holds exactly ``T * L * k`` ids of its dtype.

    >>> RoutingRecord(shape=(1, 1, 2), dtype="uint8", data="AP8=").shape
    (1, 1, 2)
    >>> RoutingRecord(shape=(2, 1, 2), dtype="uint8", data="AP8=")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for RoutingRecord
      Value error, routed_experts: data holds 2 bytes, but shape (2, 1, 2) of uint8 needs 4 ...
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    shape: tuple[pydantic.NonNegativeInt, pydantic.NonNegativeInt, pydantic.NonNegativeInt]
    dtype: Literal["uint8", "int16"]
    data: str

    @pydantic.model_validator(mode="after")
    def _data_matches_shape(self) -> RoutingRecord:
        try:
            stored = len(base64.b64decode(self.data, validate=True))
        except (binascii.Error, ValueError) as error:
            raise ValueError(f"routed_experts: data is not base64 ({error})") from error
        needed = math.prod(self.shape) * STORAGE[self.dtype][1]
        if stored != needed:
            raise ValueError(
                f"routed_experts: data holds {stored} bytes, but shape {self.shape} of {self.dtype} needs {needed} "
                "(a record cut short or written by another encoder; re-sample, or drop routed_experts to route live)"
            )
        return self
