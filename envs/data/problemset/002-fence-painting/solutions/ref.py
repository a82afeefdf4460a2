# 002-fence-painting: greedy left to right (see ref.cpp). O(n).
import sys


def main():
    data = sys.stdin.read().split()
    n, s = int(data[0]), list(data[1])
    repaints = 0
    for i in range(1, n):
        if s[i] == s[i - 1]:
            right = s[i + 1] if i + 1 < n else ""
            s[i] = next(c for c in "RGB" if c != s[i - 1] and c != right)
            repaints += 1
    print(repaints)
    print("".join(s))


main()
