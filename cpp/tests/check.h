// Minimal assertion helpers for the C++ test executables: prints the failed
// condition with its location and exits non-zero, so ctest (and sanitizer
// runs) report the failure without a test framework dependency.
#ifndef RESOUND_TESTS_CHECK_H_
#define RESOUND_TESTS_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define RESOUND_CHECK(condition)                                                        \
  do {                                                                                  \
    if (!(condition)) {                                                                 \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (false)

// True if fn() throws an Error (other exceptions propagate).
template <typename Error, typename Fn>
bool Throws(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
    return true;
  }
  return false;
}

#endif  // RESOUND_TESTS_CHECK_H_
