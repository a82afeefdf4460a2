# 009-lost-permutation, wrong: solves a fresh triangle (1, 2, i) for every index: about 2n questions.
def ask(i, j):
    print("?", i, j, flush=True)
    return int(input())


n = int(input())
s12 = ask(1, 2)
p = [0] * (n + 1)
for i in range(3, n + 1):
    a, b = ask(1, i), ask(2, i)
    p[i] = (a + b - s12) // 2
    p[1], p[2] = a - p[i], b - p[i]
print("!", *p[1:], flush=True)
