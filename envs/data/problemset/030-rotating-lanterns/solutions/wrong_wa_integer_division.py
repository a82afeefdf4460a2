"""Divides the sum by n with integer division after taking it modulo p, instead of multiplying by the
modular inverse of n: right only while the true sum stays below p.

Burnside's lemma: answer = (1 / n) * sum over e | n of phi(e) * k^(n / e) mod p = 10^9 + 7 (p > n, so n is
invertible); divisors and phi from trial division of n by the primes up to 31623."""
import sys

MOD = 10**9 + 7


def primes_upto(limit):
    sieve = bytearray([1]) * (limit + 1)
    sieve[0] = sieve[1] = 0
    for i in range(2, int(limit ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, limit + 1, i)))
    return [i for i in range(limit + 1) if sieve[i]]


def main():
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    primes = primes_upto(31623)
    res = []
    for q in range(t):
        n, k = int(data[1 + 2 * q]), int(data[2 + 2 * q])
        m = n
        divs = [(1, 1)]  # (divisor e, phi(e))
        for p in primes:
            if p * p > m:
                break
            if m % p == 0:
                e = 0
                while m % p == 0:
                    m //= p
                    e += 1
                new = []
                pk, ph = 1, p - 1
                for _ in range(e):
                    new += [(d * pk * p, f * ph) for d, f in divs]
                    pk *= p
                    ph *= p
                divs += new
        if m > 1:
            divs += [(d * m, f * (m - 1)) for d, f in divs]
        total = sum(f * pow(k, n // d, MOD) for d, f in divs) % MOD
        res.append(total // n)
    sys.stdout.write("\n".join(map(str, res)) + "\n")


main()
