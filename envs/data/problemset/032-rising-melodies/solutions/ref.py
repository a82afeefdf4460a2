"""Patience sorting with counts. Note i goes to pile k = number of piles whose top pitch is < a_i (so it ends a
longest melody of length k + 1). Each pile's pitches never increase as notes arrive, so the notes of pile k - 1 with
pitch < a_i are a suffix of that pile; prefix sums of their counts give the number of melodies ending at note i in
O(log n) with bisect. Answer: the total count of the last pile, modulo 10^9 + 7."""
import sys
from bisect import bisect_left, bisect_right

MOD = 10**9 + 7


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    tops = []  # tops[k]: smallest pitch on pile k (the latest one added)
    negs = []  # negs[k]: negated pitches of pile k, in arrival order (non-decreasing)
    cums = []  # cums[k][j]: sum of counts of the first j notes of pile k
    for tok in data[1:n + 1]:
        x = int(tok)
        k = bisect_left(tops, x)
        if k == 0:
            c = 1
        else:
            cum = cums[k - 1]
            c = (cum[-1] - cum[bisect_right(negs[k - 1], -x)]) % MOD
        if k == len(tops):
            tops.append(x)
            negs.append([-x])
            cums.append([0, c])
        else:
            tops[k] = x
            negs[k].append(-x)
            cums[k].append((cums[k][-1] + c) % MOD)
    print(cums[-1][-1] % MOD)


main()
