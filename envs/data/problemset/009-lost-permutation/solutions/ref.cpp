// 009-lost-permutation: three questions on (1,2), (1,3), (2,3) give p1 = (s12 + s13 - s23) / 2; then one question
// (1, i) per remaining index: 3 + (n - 3) = n questions.
#include <bits/stdc++.h>
using namespace std;
long long ask(int i, int j) {
    printf("? %d %d\n", i, j);
    fflush(stdout);
    long long s;
    scanf("%lld", &s);
    return s;
}
int main() {
    int n;
    scanf("%d", &n);
    vector<long long> p(n + 1);
    long long s12 = ask(1, 2), s13 = ask(1, 3), s23 = ask(2, 3);
    p[1] = (s12 + s13 - s23) / 2;
    p[2] = s12 - p[1];
    p[3] = s13 - p[1];
    for (int i = 4; i <= n; i++) p[i] = ask(1, i) - p[1];
    printf("!");
    for (int i = 1; i <= n; i++) printf(" %lld", p[i]);
    printf("\n");
    fflush(stdout);
}
