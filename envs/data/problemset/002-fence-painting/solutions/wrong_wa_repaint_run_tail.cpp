// 002-fence-painting, wrong: repaints every plank of a run but the first (alternating two colours), L - 1 repaints
// instead of floor(L / 2).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    string s;
    cin >> n >> s;
    string orig = s;
    int repaints = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && orig[j] == orig[i]) j++;
        char other = 'R';
        for (char c : string("RGB"))
            if (c != orig[i] && (j == n || c != orig[j])) { other = c; break; }
        for (int k = i + 1; k < j; k++) {
            s[k] = ((k - i) % 2) ? other : orig[i];
            repaints++;
        }
        i = j;
    }
    printf("%d\n%s\n", repaints, s.c_str());
}
