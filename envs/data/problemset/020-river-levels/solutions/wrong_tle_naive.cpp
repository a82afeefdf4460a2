// 020-river-levels, too slow: updates and answers every event gauge by gauge. O(n * q).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, q;
    scanf("%d %d", &n, &q);
    vector<long long> a(n + 1);
    for (int i = 1; i <= n; i++) scanf("%lld", &a[i]);
    while (q--) {
        int type, l, r;
        scanf("%d %d %d", &type, &l, &r);
        if (type == 1) {
            long long x;
            scanf("%lld", &x);
            for (int i = l; i <= r; i++) a[i] += x;
        } else {
            long long best = LLONG_MAX;
            for (int i = l; i <= r; i++) best = min(best, a[i]);
            printf("%lld\n", best);
        }
    }
}
