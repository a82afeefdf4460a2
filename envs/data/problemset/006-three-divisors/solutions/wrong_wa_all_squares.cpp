// 006-three-divisors, wrong: counts every square greater than 1 (16 has five divisors, not three).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int q;
    scanf("%d", &q);
    while (q--) {
        long long l, r;
        scanf("%lld %lld", &l, &r);
        long long hi = (long long)sqrtl((long double)r), lo = (long long)sqrtl((long double)(l - 1));
        while (hi * hi > r) hi--;
        while (lo * lo > l - 1) lo--;
        printf("%lld\n", max(0LL, hi - max(lo, 1LL)));
    }
}
