"""pass@k: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code",
arXiv 2107.03374, section 2.1), averaged over problems.

For one problem with ``n`` samples of which ``c`` are correct::

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i)     (1.0 when n - c < k)

The product form is the paper's numerically stable one (no huge binomials).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["pass_at_k", "mean_pass_at_k", "parse_ks", "pass_at_ks"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``n`` samples, ``c`` correct; ValueError unless 0 <= c <= n, 1 <= k <= n."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(
            f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}"
            + ("; sample at least k times per problem (--samples >= k)" if k > n else "")
        )
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float | None:
    """Mean of :func:`pass_at_k` over problems given as ``(n, c)``; ``None`` for no problems."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    return sum(values) / len(values) if values else None


def parse_ks(text: str, samples: int) -> list[int]:
    """``"1,5"`` -> ``[1, 5]``; ValueError naming ``--k`` when a k is not a positive int or exceeds ``samples``."""
    try:
        ks = sorted({int(part) for part in str(text).split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--k {text!r}: expected comma-separated positive integers, e.g. 1,5") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k {text!r}: expected comma-separated positive integers, e.g. 1,5")
    if ks[-1] > samples:
        raise ValueError(
            f"--k {text!r}: pass@{ks[-1]} needs at least {ks[-1]} samples per problem; "
            f"raise --samples (now {samples}) or lower --k"
        )
    return ks


def pass_at_ks(counts: Sequence[tuple[int, int]], ks: Sequence[int]) -> dict[str, float | None]:
    """``{"pass@k": mean}`` for each k that every problem's ``n`` allows (others are ``None``)."""
    out: dict[str, float | None] = {}
    for k in ks:
        usable = all(n >= k for n, _ in counts)
        out[f"pass@{k}"] = mean_pass_at_k(counts, k) if usable else None
    return out
