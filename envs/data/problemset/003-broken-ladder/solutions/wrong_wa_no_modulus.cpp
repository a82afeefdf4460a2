// 003-broken-ladder, wrong: takes the modulus only when printing; the 64-bit counts overflow long before.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<char> broken(n + 1, 0);
    for (int i = 0; i < m; i++) { int b; scanf("%d", &b); broken[b] = 1; }
    vector<unsigned long long> ways(n + 1, 0);
    ways[0] = 1;
    for (int i = 1; i <= n; i++)
        if (!broken[i]) ways[i] = ways[i - 1] + (i >= 2 ? ways[i - 2] : 0);
    printf("%llu\n", ways[n] % 998244353ULL);
}
