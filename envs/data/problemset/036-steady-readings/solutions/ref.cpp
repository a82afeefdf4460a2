// Two pointers: for every right end r, the smallest steady left end l only moves right. Monotonic deques keep the
// maximum and minimum of the window; every r adds r - l + 1 stretches (64-bit: up to n(n+1)/2 = 2 * 10^10).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n; long long k;
    scanf("%d %lld", &n, &k);
    vector<long long> a(n);
    for (auto& x : a) scanf("%lld", &x);
    deque<int> mx, mn;
    long long total = 0;
    for (int r = 0, l = 0; r < n; r++) {
        while (!mx.empty() && a[mx.back()] <= a[r]) mx.pop_back();
        while (!mn.empty() && a[mn.back()] >= a[r]) mn.pop_back();
        mx.push_back(r); mn.push_back(r);
        while (a[mx.front()] - a[mn.front()] > k) {
            l++;
            if (mx.front() < l) mx.pop_front();
            if (mn.front() < l) mn.pop_front();
        }
        total += r - l + 1;
    }
    printf("%lld\n", total);
}
