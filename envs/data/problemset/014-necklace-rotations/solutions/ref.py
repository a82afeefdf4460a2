# 014-necklace-rotations: t is a rotation iff it occurs in s + s; then the rotations equal to t are spaced by the
# smallest period p of s that divides n, so there are n / p of them. p from the prefix function of s: p0 = n - pi[n-1]
# if p0 divides n, else n. O(n).
import sys


def main():
    data = sys.stdin.read().split()
    n, s, t = int(data[0]), data[1], data[2]
    if (s + s).find(t) < 0:
        print(0)
        return
    pi = [0] * n
    k = 0
    for i in range(1, n):
        c = s[i]
        while k and c != s[k]:
            k = pi[k - 1]
        if c == s[k]:
            k += 1
        pi[i] = k
    period = n - pi[-1]
    print(n // period if n % period == 0 else 1)


main()
