// 004-dance-pairs, too slow: sorted, but every dancer scans all partners for the first free one. O(n * m).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    long long d;
    scanf("%d %d %lld", &n, &m, &d);
    vector<long long> a(n), b(m);
    for (auto &x : a) scanf("%lld", &x);
    for (auto &x : b) scanf("%lld", &x);
    sort(a.begin(), a.end());
    sort(b.begin(), b.end());
    vector<char> used(m, 0);
    int pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++)
            if (!used[j] && llabs(a[i] - b[j]) <= d) { used[j] = 1; pairs++; break; }
    printf("%d\n", pairs);
}
