"""Sprague-Grundy: g(1) = 0, g(2m) = m, g(2m + 1) = g(m) (proof in ref.cpp); Alice wins iff the XOR is non-zero."""
import sys


def grundy(x):
    while x & 1 and x > 1:
        x >>= 1
    return x >> 1


def main():
    data = sys.stdin.buffer.read().split()
    t = int(data[0])
    pos = 1
    res = []
    for _ in range(t):
        n = int(data[pos])
        total = 0
        for tok in data[pos + 1:pos + 1 + n]:
            total ^= grundy(int(tok))
        pos += 1 + n
        res.append("Alice" if total else "Bob")
    sys.stdout.write("\n".join(res) + "\n")


main()
