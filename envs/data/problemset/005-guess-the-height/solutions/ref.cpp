// 005-guess-the-height: binary search for the largest y with answer yes: ceil(log2 n) <= 30 questions.
#include <bits/stdc++.h>
using namespace std;
int main() {
    long long n;
    cin >> n;
    long long lo = 1, hi = n;  // x in [lo, hi]
    while (lo < hi) {
        long long mid = (lo + hi + 1) / 2;
        cout << "? " << mid << endl;  // endl flushes
        string answer;
        cin >> answer;
        if (answer == "yes") lo = mid; else hi = mid - 1;
    }
    cout << "! " << lo << endl;
}
