# 017-stone-piles: Grundy value of a pile is a mod (k + 1); the first player wins iff the XOR is non-zero.
import sys


def main():
    data = sys.stdin.buffer.read().split()
    t, pos, out = int(data[0]), 1, []
    for _ in range(t):
        n, m = int(data[pos]), int(data[pos + 1]) + 1
        x = 0
        for a in data[pos + 2:pos + 2 + n]:
            x ^= int(a) % m
        pos += 2 + n
        out.append("Alice" if x else "Bob")
    sys.stdout.write("\n".join(out) + "\n")


main()
