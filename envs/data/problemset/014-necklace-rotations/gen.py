"""Hidden tests of 014-necklace-rotations: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N = 500_000
rng = random.Random(14014)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, s, t):
    assert len(s) == len(t)
    (out / f"{name}.in").write_text(f"{len(s)}\n{s}\n{t}\n")


def rotate(s, k):
    return s[k:] + s[:k]


def random_string(n, letters="abcdefghijklmnopqrstuvwxyz"):
    return "".join(rng.choice(letters) for _ in range(n))


def thue_morse(k):
    """a/b Thue-Morse word of length 2^k: its hash equals its complement's for any base modulo 2^64 (k >= 11)."""
    word = "a"
    for _ in range(k):
        word += word.translate(str.maketrans("ab", "ba"))
    return word


write("01-min-equal", "z", "z")
write("02-min-different", "a", "b")
write("03-small-periodic", "abab", "baba")
write("04-max-one-letter", "a" * MAX_N, "a" * MAX_N)  # every k works: comparing each rotation is quadratic
base = random_string(1000, "ab")
write("05-max-period-1000", base * (MAX_N // 1000), rotate(base * (MAX_N // 1000), 777))
s = random_string(MAX_N)
write("06-max-random-rotation", s, rotate(s, rng.randrange(MAX_N)))
write("07-max-random-no", s, rotate(s, 12345)[:-1] + ("a" if s[12344] != "a" else "b"))
tm = thue_morse(16)
write("08-thue-morse-complement", tm, tm.translate(str.maketrans("ab", "ba")))
almost = "a" * (MAX_N - 1) + "b"
write("09-max-almost-one-letter", almost, rotate(almost, MAX_N // 2))
write("10-max-almost-no", almost, "a" * MAX_N)
period = "abcab"
write("11-max-period-5", period * (MAX_N // 5), rotate(period * (MAX_N // 5), 3))
write("12-not-a-rotation", "abc", "acb")
