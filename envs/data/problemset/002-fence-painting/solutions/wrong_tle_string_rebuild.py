# 002-fence-painting, too slow: rebuilds the whole fence, plank by plank, for each repaint. O(n^2) on a one-colour
# fence, in Python-level steps (a string slice is a memcpy: fast enough to pass on a fast machine).
import sys

data = sys.stdin.read().split()
n, s = int(data[0]), data[1]
repaints = 0
for i in range(1, n):
    if s[i] == s[i - 1]:
        right = s[i + 1] if i + 1 < n else ""
        c = next(c for c in "RGB" if c != s[i - 1] and c != right)
        s = "".join(c if j == i else s[j] for j in range(n))
        repaints += 1
print(repaints)
print(s)
