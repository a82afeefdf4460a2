// std::sort with a comparator that weighs: introsort uses more comparisons than Q(n) (and repeats weighings).
#include <bits/stdc++.h>
using namespace std;
bool lighter(int i, int j) {
    printf("? %d %d\n", i, j);
    fflush(stdout);
    char c[4];
    scanf("%3s", c);
    return c[0] == '<';
}
int main() {
    int n;
    scanf("%d", &n);
    vector<int> order(n);
    iota(order.begin(), order.end(), 1);
    sort(order.begin(), order.end(), [](int a, int b) { return a != b && lighter(a, b); });
    printf("!");
    for (int x : order) printf(" %d", x);
    printf("\n");
    fflush(stdout);
}
