// 001-even-split, wrong: 32-bit sums overflow when the weights are large.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        int n;
        scanf("%d", &n);
        vector<int> a(n);
        int total = 0;
        for (auto &x : a) { scanf("%d", &x); total += x; }
        int prefix = 0, count = 0;
        for (int k = 0; k + 1 < n; k++) {
            prefix += a[k];
            if (prefix == total - prefix) count++;
        }
        printf("%d\n", count);
    }
}
