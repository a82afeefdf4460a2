"""Sum over subsets: f[m] = number of a_j that are submasks of m; the answer for a_i is f[complement of a_i].
For bit b every index with the bit set adds the index without it; the additions run as whole-slice map(add)
calls, either one per residue class (small b) or one per block (large b), so Python never loops per element."""
import sys
from operator import add

B = 20
SIZE = 1 << B


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    a = list(map(int, data[1:n + 1]))
    f = [0] * SIZE
    for x in a:
        f[x] += 1
    for b in range(B):
        bit = 1 << b
        step = bit << 1
        if bit <= SIZE // step:  # few residues, long strided slices
            for r in range(bit, step):
                f[r::step] = list(map(add, f[r::step], f[r - bit::step]))
        else:  # few blocks, long contiguous slices
            for start in range(0, SIZE, step):
                f[start + bit:start + step] = list(map(add, f[start + bit:start + step], f[start:start + bit]))
    full = SIZE - 1
    sys.stdout.write(" ".join(str(f[full ^ x]) for x in a) + "\n")


main()
