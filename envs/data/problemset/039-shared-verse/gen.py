"""Hidden tests for Shared Verse: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3919)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = 200000
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def write(name, s, t):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{s}\n{t}\n")


def rand(n, alphabet):
    return "".join(rng.choice(alphabet) for _ in range(n))


def thue_morse(k):
    """The Thue-Morse word of length 2^k over {a, b}."""
    word = "a"
    for _ in range(k):
        word += word.translate(str.maketrans("ab", "ba"))
    return word


def flip(word):
    return word.translate(str.maketrans("ab", "ba"))


write("01", "a", "a")
write("02", "a", "b")
# Thue-Morse word against its complement: aligned windows of length 2048 * j have equal polynomial hashes modulo
# 2^64 for every base, so an unchecked 64-bit hash finds common substrings that do not exist
tm = thue_morse(17)
write("03", tm, flip(tm))
write("04", tm[:N], flip(thue_morse(18)[:N]))
write("05", rand(N, LETTERS), rand(N, LETTERS))
write("06", rand(N, "ab"), rand(N, "ab"))
common = rand(50000, LETTERS)
write("07", rand(70000, LETTERS) + common + rand(80000, LETTERS), rand(120000, LETTERS) + common + rand(30000, LETTERS))
write("08", "a" * N, "a" * N)
write("09", rand(N, "abc"), rand(N, "xyz"))
write("10", ("abcab" * N)[:N], ("bcaba" * N)[:N - 7])
write("11", rand(N, LETTERS), rand(1, LETTERS))
write("12", "z" * (N - 1) + "y", "y" + "z" * (N - 1))
for t in range(13, 17):
    write(f"{t}", rand(rng.randint(1, 12), "abc"), rand(rng.randint(1, 12), "abc"))
