// Two pointers with deques, but the count is a 32-bit int: overflows past 2^31 stretches.
// (the window logic is right)
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n; long long k;
    scanf("%d %lld", &n, &k);
    vector<long long> a(n);
    for (auto& x : a) scanf("%lld", &x);
    deque<int> mx, mn;
    int total = 0;
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
    printf("%d\n", total);
}
