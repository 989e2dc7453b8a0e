/* A tiny harness for the C tests: CHECK_EQ prints the failing expression and exits 1. */
#ifndef IDSPACE_TEST_CHECK_H
#define IDSPACE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK_EQ(expr, expected)                                                          \
  do {                                                                                    \
    long long check_got_ = (long long)(expr);                                             \
    long long check_want_ = (long long)(expected);                                        \
    if (check_got_ != check_want_) {                                                      \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #expr,    \
              check_got_, check_want_);                                                   \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

#define CHECK(cond) CHECK_EQ(!!(cond), 1)

#endif
