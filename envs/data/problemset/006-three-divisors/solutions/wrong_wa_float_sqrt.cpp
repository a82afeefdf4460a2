// 006-three-divisors, wrong: the square root in single precision rounds 999983^2 - 1 up to 999983.
#include <bits/stdc++.h>
using namespace std;
const int N = 1000000;
int main() {
    vector<int> pi(N + 2, 0);
    vector<char> composite(N + 2, 0);
    for (long long i = 2; i <= N + 1; i++) {
        pi[i] = pi[i - 1] + !composite[i];
        if (!composite[i]) for (long long j = i * i; j <= N + 1; j += i) composite[j] = 1;
    }
    int q;
    scanf("%d", &q);
    while (q--) {
        long long l, r;
        scanf("%lld %lld", &l, &r);
        long long a = (long long)sqrtf((float)r), b = (long long)sqrtf((float)(l - 1));
        printf("%d\n", pi[min<long long>(a, N)] - pi[min<long long>(b, N)]);
    }
}
