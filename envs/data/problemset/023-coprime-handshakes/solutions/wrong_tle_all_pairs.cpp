// Checks every pair with gcd: O(n^2 log A), too slow for n = 2 * 10^5.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n);
    for (auto& x : a) scanf("%d", &x);
    long long ans = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) ans += std::gcd(a[i], a[j]) == 1;
    printf("%lld\n", ans);
}
