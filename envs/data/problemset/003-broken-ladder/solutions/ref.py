# 003-broken-ladder: ways[i] = ways[i-1] + ways[i-2] (mod p), 0 on broken steps; two rolling values. O(n).
import sys

MOD = 998244353


def main():
    data = sys.stdin.buffer.read().split()
    n, m = int(data[0]), int(data[1])
    broken = bytearray(n + 1)
    for b in data[2:2 + m]:
        broken[int(b)] = 1
    before, last = 0, 1  # ways[i-2], ways[i-1]
    for i in range(1, n + 1):
        before, last = last, (0 if broken[i] else (last + before) % MOD)
    print(last)


main()
