"""Mobius inversion: #coprime pairs = sum_d mu(d) * C(c_d, 2), c_d = number of a_i divisible by d."""
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    top = 10**6
    freq = [0] * (top + 1)
    for tok in data[1:n + 1]:
        freq[int(tok)] += 1
    mu = [1] * (top + 1)
    is_prime = bytearray([1]) * (top + 1)
    is_prime[0] = is_prime[1] = 0
    for p in range(2, top + 1):
        if not is_prime[p]:
            continue
        if p * p <= top:
            is_prime[p * p::p] = bytes(len(range(p * p, top + 1, p)))
            mu[p * p::p * p] = [0] * len(range(p * p, top + 1, p * p))
        mu[p::p] = [-x for x in mu[p::p]]
    ans = 0
    for d in range(1, top + 1):
        if mu[d]:
            c = sum(freq[d::d])
            if c > 1:
                ans += mu[d] * (c * (c - 1) // 2)
    print(ans)


main()
