# 006-three-divisors, too slow: tests every p up to sqrt(r) for primality in each question.
import sys
from math import isqrt

data = sys.stdin.buffer.read().split()
q = int(data[0])


def is_prime(p):
    if p < 2:
        return False
    return all(p % d for d in range(2, isqrt(p) + 1))


for k in range(q):
    l, r = int(data[1 + 2 * k]), int(data[2 + 2 * k])
    print(sum(1 for p in range(isqrt(l - 1) + 1, isqrt(r) + 1) if is_prime(p)))
