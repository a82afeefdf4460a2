// 019-mountain-peak, wrong: walks uphill from post 1 one post at a time; far too many questions.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    int p = 1;
    long long here = -1;
    if (n > 1) {
        printf("? 1\n");
        fflush(stdout);
        scanf("%lld", &here);
    }
    while (p < n) {
        printf("? %d\n", p + 1);
        fflush(stdout);
        long long next;
        if (scanf("%lld", &next) != 1) return 0;
        if (next < here) break;
        here = next;
        p++;
    }
    printf("! %d\n", p);
    fflush(stdout);
}
