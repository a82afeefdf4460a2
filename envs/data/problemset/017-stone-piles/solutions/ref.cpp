// 017-stone-piles: a pile of a stones where a move removes 1..k has Grundy value a mod (k + 1) (from a, the moves
// reach every residue but its own). The sum of games is lost for the player to move iff the XOR is 0
// (Sprague-Grundy theorem).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        int n;
        long long k;
        scanf("%d %lld", &n, &k);
        long long x = 0;
        for (int i = 0; i < n; i++) { long long a; scanf("%lld", &a); x ^= a % (k + 1); }
        puts(x ? "Alice" : "Bob");
    }
}
