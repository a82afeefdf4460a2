// 001-even-split: prefix sums in 64 bits; a cut k works when 2 * prefix(k) == total. O(n).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    if (scanf("%d", &t) != 1) return 0;
    while (t--) {
        int n;
        scanf("%d", &n);
        vector<long long> a(n);
        long long total = 0;
        for (auto &x : a) { scanf("%lld", &x); total += x; }
        long long prefix = 0, count = 0;
        for (int k = 0; k + 1 < n; k++) {
            prefix += a[k];
            if (2 * prefix == total) count++;
        }
        printf("%lld\n", count);
    }
}
