# 002-fence-painting, wrong: the new colour only differs from the left neighbour and may equal the right one.
import sys

data = sys.stdin.read().split()
n, s = int(data[0]), list(data[1])
repaints = 0
for i in range(1, n):
    if s[i] == s[i - 1]:
        s[i] = "RGB"[("RGB".index(s[i - 1]) + 1) % 3]
        repaints += 1
print(repaints)
print("".join(s))
