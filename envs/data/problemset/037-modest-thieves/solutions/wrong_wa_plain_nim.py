"""Treats the game as ordinary Nim (XOR of the chest sizes)."""
import sys

data = sys.stdin.buffer.read().split()
t, pos, res = int(data[0]), 1, []
for _ in range(t):
    n = int(data[pos])
    total = 0
    for tok in data[pos + 1:pos + 1 + n]:
        total ^= int(tok)
    pos += 1 + n
    res.append("Alice" if total else "Bob")
print("\n".join(res))
