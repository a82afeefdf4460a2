# 011-festival-lights: meet in the middle. Presses act as XOR of masks; for the subsets of the first half of the
# switches keep the fewest presses per toggled mask, then look up need ^ mask for each subset of the second half.
# O(2^(m/2) * m).
import sys


def subsets(masks):
    """{toggled mask: fewest presses} over all subsets of `masks`."""
    best = {0: 0}
    for mask in masks:
        for toggled, presses in list(best.items()):
            key = toggled ^ mask
            if best.get(key, 99) > presses + 1:
                best[key] = presses + 1
    return best


def main():
    data = sys.stdin.read().split()
    n, m, state = int(data[0]), int(data[1]), data[2]
    need = sum(1 << i for i, c in enumerate(state) if c == "0")
    masks, pos = [], 3
    for _ in range(m):
        c = int(data[pos])
        masks.append(sum(1 << (int(x) - 1) for x in data[pos + 1:pos + 1 + c]))
        pos += 1 + c
    left, right = subsets(masks[:m // 2]), subsets(masks[m // 2:])
    best = min((p + left[need ^ t] for t, p in right.items() if need ^ t in left), default=-1)
    print(best)


main()
