// 011-festival-lights, wrong: forgets the impossible case and prints its "infinity" (m + 1).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    char state[32];
    scanf("%d %d %s", &n, &m, state);
    int need = 0;
    for (int i = 0; i < n; i++) if (state[i] == '0') need |= 1 << i;
    vector<int> sw(m, 0);
    for (int j = 0; j < m; j++) {
        int c;
        scanf("%d", &c);
        while (c--) { int lamp; scanf("%d", &lamp); sw[j] |= 1 << (lamp - 1); }
    }
    int best = m + 1;
    for (int s = 0; s < (1 << m); s++) {
        int toggled = 0;
        for (int j = 0; j < m; j++) if (s >> j & 1) toggled ^= sw[j];
        if (toggled == need) best = min(best, __builtin_popcount(s));
    }
    printf("%d\n", best);
}
