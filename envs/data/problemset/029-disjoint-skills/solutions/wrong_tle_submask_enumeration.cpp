// Enumerates all submasks of each developer's complement: 2^(20 - popcount(a_i)) steps each, 2^20 for a_i = 0.
#include <bits/stdc++.h>
using namespace std;
int main() {
    const int FULL = (1 << 20) - 1;
    int n;
    scanf("%d", &n);
    vector<int> a(n), cnt(1 << 20, 0);
    for (auto& x : a) { scanf("%d", &x); cnt[x]++; }
    for (int i = 0; i < n; i++) {
        int c = FULL ^ a[i];
        long long total = 0;
        for (int s = c;; s = (s - 1) & c) { total += cnt[s]; if (!s) break; }
        printf("%lld%c", total, i + 1 < n ? ' ' : '\n');
    }
}
