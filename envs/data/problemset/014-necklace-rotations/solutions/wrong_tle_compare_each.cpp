// 014-necklace-rotations, too slow: compares every rotation with t letter by letter. O(n^2) when they match.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    static char s[500005], t[500005];
    scanf("%d %s %s", &n, s, t);
    long long count = 0;
    for (int k = 0; k < n; k++) {
        int i = 0;
        while (i < n && s[(k + i) % n] == t[i]) i++;
        if (i == n) count++;
    }
    printf("%lld\n", count);
}
