// 004-dance-pairs: sort both schools and sweep: the shortest unpaired dancers pair when close enough; otherwise
// the shorter of the two can pair with nobody later and is dropped (exchange argument). O(n log n).
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
    int i = 0, j = 0, pairs = 0;
    while (i < n && j < m) {
        if (llabs(a[i] - b[j]) <= d) { pairs++; i++; j++; }
        else if (a[i] < b[j]) i++;
        else j++;
    }
    printf("%d\n", pairs);
}
