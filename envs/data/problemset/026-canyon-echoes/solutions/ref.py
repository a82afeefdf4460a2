"""Z-function: echo i resonates at strength k iff z[i] >= k; answer with suffix sums of counts of z values."""
import sys


def main():
    data = sys.stdin.buffer.read().split()
    s = data[0]
    n = len(s)
    z = [0] * n
    cnt = [0] * (n + 2)
    l = r = 0
    for i in range(1, n):
        zi = 0
        if i < r:
            zi = min(r - i, z[i - l])
        while i + zi < n and s[zi] == s[i + zi]:
            zi += 1
        z[i] = zi
        if i + zi > r:
            l, r = i, i + zi
        cnt[zi] += 1
    for k in range(n, -1, -1):
        cnt[k] += cnt[k + 1]
    q = int(data[1])
    sys.stdout.write("\n".join(str(cnt[int(k)]) for k in data[2:2 + q]) + "\n")


main()
