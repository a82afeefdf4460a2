// 002-fence-painting: greedy left to right. Plank i equal to plank i-1 is repainted with a colour different from
// both neighbours; a run of length L costs floor(L / 2), which is the minimum (every pair in the run needs one).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    string s;
    cin >> n >> s;
    int repaints = 0;
    for (int i = 1; i < n; i++) {
        if (s[i] != s[i - 1]) continue;
        for (char c : string("RGB")) {
            if (c != s[i - 1] && (i + 1 == n || c != s[i + 1])) { s[i] = c; break; }
        }
        repaints++;
    }
    printf("%d\n%s\n", repaints, s.c_str());
}
