/* Approximate sin(x) on [0, pi/2] with a polynomial: the evaluator compiles this file with
 * gcc, runs it on sample points and scores the largest error. Only the coefficients (and the
 * evaluation scheme) between the markers evolve. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

// EVOLVE-BLOCK-START
static double approx_sin(double x) {
    /* Horner's scheme for c1 x + c3 x^3 + c5 x^5. */
    const double c1 = 0.9;
    const double c3 = -0.1;
    const double c5 = 0.01;
    double x2 = x * x;
    return x * (c1 + x2 * (c3 + x2 * c5));
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
