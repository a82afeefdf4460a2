// 017-stone-piles, wrong: an off-by-one in the period, a mod k instead of a mod (k + 1).
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
        for (int i = 0; i < n; i++) { long long a; scanf("%lld", &a); x ^= a % k; }
        puts(x ? "Alice" : "Bob");
    }
}
