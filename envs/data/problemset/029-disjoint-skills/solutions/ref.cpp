// Sum over subsets (SOS DP): f[m] = number of a_j that are submasks of m; the answer for a_i is
// f[complement of a_i]. O(20 * 2^20).
#include <bits/stdc++.h>
using namespace std;
int main() {
    const int B = 20, FULL = (1 << B) - 1;
    int n;
    scanf("%d", &n);
    vector<int> a(n), f(1 << B, 0);
    for (auto& x : a) { scanf("%d", &x); f[x]++; }
    for (int b = 0; b < B; b++)
        for (int m = 0; m <= FULL; m++)
            if (m >> b & 1) f[m] += f[m ^ (1 << b)];
    for (int i = 0; i < n; i++) printf("%d%c", f[FULL ^ a[i]], i + 1 < n ? ' ' : '\n');
}
