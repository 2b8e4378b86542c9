/* SPDX-License-Identifier: MIT */
/* <float.h> for NVRTC: the IEEE 754 binary32 (float) and binary64 (double)
 * characteristics.  long double has no device support: LDBL_* are double's
 * values (double constants), as the device computes long double as double. */
#ifndef BARECUDA_FLOAT_H
#define BARECUDA_FLOAT_H

#ifndef FLT_RADIX
#define FLT_RADIX 2
#endif
#ifndef FLT_ROUNDS
#define FLT_ROUNDS 1
#endif
#ifndef FLT_EVAL_METHOD
#define FLT_EVAL_METHOD 0
#endif
#ifndef DECIMAL_DIG
#define DECIMAL_DIG 17
#endif

#ifndef FLT_MANT_DIG
#define FLT_MANT_DIG 24
#define FLT_DIG 6
#define FLT_DECIMAL_DIG 9
#define FLT_MIN_EXP (-125)
#define FLT_MAX_EXP 128
#define FLT_MIN_10_EXP (-37)
#define FLT_MAX_10_EXP 38
#define FLT_HAS_SUBNORM 1
/* 2^-23, 2^-126, (2 - 2^-23) * 2^127 and 2^-149, to 21 digits */
#define FLT_EPSILON 1.19209289550781250000e-07F
#define FLT_MIN 1.17549435082228750797e-38F
#define FLT_MAX 3.40282346638528859812e+38F
#define FLT_TRUE_MIN 1.40129846432481707092e-45F
#endif

#ifndef DBL_MANT_DIG
#define DBL_MANT_DIG 53
#define DBL_DIG 15
#define DBL_DECIMAL_DIG 17
#define DBL_MIN_EXP (-1021)
#define DBL_MAX_EXP 1024
#define DBL_MIN_10_EXP (-307)
#define DBL_MAX_10_EXP 308
#define DBL_HAS_SUBNORM 1
/* 2^-52, 2^-1022, (2 - 2^-52) * 2^1023 and 2^-1074, to 21 digits */
#define DBL_EPSILON 2.22044604925031308085e-16
#define DBL_MIN 2.22507385850720138309e-308
#define DBL_MAX 1.79769313486231570815e+308
#define DBL_TRUE_MIN 4.94065645841246544177e-324
#endif

#ifndef LDBL_MANT_DIG
#define LDBL_MANT_DIG DBL_MANT_DIG
#define LDBL_DIG DBL_DIG
#define LDBL_DECIMAL_DIG DBL_DECIMAL_DIG
#define LDBL_MIN_EXP DBL_MIN_EXP
#define LDBL_MAX_EXP DBL_MAX_EXP
#define LDBL_MIN_10_EXP DBL_MIN_10_EXP
#define LDBL_MAX_10_EXP DBL_MAX_10_EXP
#define LDBL_HAS_SUBNORM 1
#define LDBL_EPSILON DBL_EPSILON
#define LDBL_MIN DBL_MIN
#define LDBL_MAX DBL_MAX
#define LDBL_TRUE_MIN DBL_TRUE_MIN
#endif

#endif
