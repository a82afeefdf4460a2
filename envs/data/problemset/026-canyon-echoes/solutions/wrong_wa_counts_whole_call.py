"""Counts position 1 (the call itself) as an echo: every answer is one too large."""
import sys

data = sys.stdin.buffer.read().split()
s = data[0]
n = len(s)
z = [0] * n
z[0] = n
cnt = [0] * (n + 2)
cnt[n] += 1
l = r = 0
for i in range(1, n):
    zi = min(r - i, z[i - l]) if i < r else 0
    while i + zi < n and s[zi] == s[i + zi]:
        zi += 1
    z[i] = zi
    if i + zi > r:
        l, r = i, i + zi
    cnt[zi] += 1
for k in range(n, -1, -1):
    cnt[k] += cnt[k + 1]
print("\n".join(str(cnt[int(k)]) for k in data[2:2 + int(data[1])]))
