# 017-stone-piles, wrong: plays it as ordinary Nim, XOR of the pile sizes, ignoring the limit k.
import sys

data = sys.stdin.buffer.read().split()
t, pos = int(data[0]), 1
for _ in range(t):
    n = int(data[pos])
    x = 0
    for a in data[pos + 2:pos + 2 + n]:
        x ^= int(a)
    pos += 2 + n
    print("Alice" if x else "Bob")
