// 014-necklace-rotations, wrong: polynomial hashing modulo 2^64 (natural overflow); the Thue-Morse word and its
// complement collide, so a rotation is counted that does not match.
#include <bits/stdc++.h>
using namespace std;
typedef unsigned long long u64;
int main() {
    int n;
    static char bs[500005], bt[500005];
    scanf("%d %s %s", &n, bs, bt);
    string s(bs), t(bt), text = s + s;
    const u64 B = 131;
    u64 ht = 0, power = 1;
    for (int i = 0; i < n; i++) { ht = ht * B + t[i]; power *= B; }
    u64 h = 0;
    long long count = 0;
    for (int i = 0; i < 2 * n - 1; i++) {
        h = h * B + text[i];
        if (i >= n) h -= power * text[i - n];
        if (i >= n - 1 && h == ht) count++;
    }
    printf("%lld\n", count);
}
