# 002-fence-painting, too slow: rebuilds the whole string for each repaint. O(n^2) on a one-colour fence.
import sys

data = sys.stdin.read().split()
n, s = int(data[0]), data[1]
repaints = 0
for i in range(1, n):
    if s[i] == s[i - 1]:
        right = s[i + 1] if i + 1 < n else ""
        c = next(c for c in "RGB" if c != s[i - 1] and c != right)
        s = s[:i] + c + s[i + 1:]
        repaints += 1
print(repaints)
print(s)
