# 014-necklace-rotations, wrong: prints 1 when t is some rotation of s, forgetting periodic necklaces.
data = open(0).read().split()
s, t = data[1], data[2]
print(1 if t in s + s else 0)
