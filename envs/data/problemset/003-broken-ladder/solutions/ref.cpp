// 003-broken-ladder: ways[i] = ways[i-1] + ways[i-2] (mod p) for a sound step i, 0 for a broken one. O(n).
#include <bits/stdc++.h>
using namespace std;
const long long MOD = 998244353;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<char> broken(n + 1, 0);
    for (int i = 0; i < m; i++) { int b; scanf("%d", &b); broken[b] = 1; }
    vector<long long> ways(n + 1, 0);
    ways[0] = 1;
    for (int i = 1; i <= n; i++) {
        if (broken[i]) continue;
        ways[i] = (ways[i - 1] + (i >= 2 ? ways[i - 2] : 0)) % MOD;
    }
    printf("%lld\n", ways[n]);
}
