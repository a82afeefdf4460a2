// 004-dance-pairs, wrong: heights in int; a[i] + d overflows for tall dancers.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m, d;
    scanf("%d %d %d", &n, &m, &d);
    vector<int> a(n), b(m);
    for (auto &x : a) { long long v; scanf("%lld", &v); x = (int)v; }
    for (auto &x : b) { long long v; scanf("%lld", &v); x = (int)v; }
    sort(a.begin(), a.end());
    sort(b.begin(), b.end());
    int i = 0, j = 0, pairs = 0;
    while (i < n && j < m) {
        if (b[j] <= a[i] + d && a[i] <= b[j] + d) { pairs++; i++; j++; }
        else if (a[i] < b[j]) i++;
        else j++;
    }
    printf("%d\n", pairs);
}
