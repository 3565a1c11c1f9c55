/* The coefficients main.c uses. */
#ifndef POLY_H
#define POLY_H
// EVOLVE-BLOCK-START
#define C1 0.9
#define C3 -0.1
#define C5 0.01
// EVOLVE-BLOCK-END
#endif
