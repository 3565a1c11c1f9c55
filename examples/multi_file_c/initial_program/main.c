/* Approximate sin(x) on [0, pi/2]: main.c evaluates the polynomial whose coefficients
 * poly.h holds (#include "poly.h": the compiler finds the sibling beside this file). The
 * evaluator is handed this file; both files have an EVOLVE-BLOCK. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "poly.h"

// EVOLVE-BLOCK-START
static double approx_sin(double x) {
    double x2 = x * x;
    return x * (C1 + x2 * (C3 + x2 * C5));
}
// EVOLVE-BLOCK-END

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    for (int i = 0; i <= n; i++) {
        double x = (M_PI / 2.0) * i / n;
        printf("%.17g %.17g\n", x, approx_sin(x));
    }
    return 0;
}
