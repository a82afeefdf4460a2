# 006-three-divisors: x has three divisors iff x = p^2, p prime. Sieve up to 10^6, prefix counts, isqrt per query.
import sys
from itertools import accumulate
from math import isqrt

N = 10**6


def main():
    sieve = bytearray([1]) * (N + 1)
    sieve[0] = sieve[1] = 0
    for i in range(2, isqrt(N) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, N + 1, i)))
    pi = list(accumulate(sieve))
    data = sys.stdin.buffer.read().split()
    q = int(data[0])
    out = []
    for k in range(q):
        l, r = int(data[1 + 2 * k]), int(data[2 + 2 * k])
        out.append(pi[isqrt(r)] - pi[isqrt(l - 1)])
    sys.stdout.write("\n".join(map(str, out)) + "\n")


main()
