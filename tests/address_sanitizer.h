// TANDEM_ADDRESS_SANITIZER: 1 in a build under AddressSanitizer, whichever compiler made it. GCC
// defines __SANITIZE_ADDRESS__; clang before 18 says so only through __has_feature. Tests that
// measure the heap or the process's memory skip there: ASan's allocator and quarantine replace
// malloc's arenas.
#ifndef TANDEM_TESTS_ADDRESS_SANITIZER_H_
#define TANDEM_TESTS_ADDRESS_SANITIZER_H_

#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef TANDEM_ADDRESS_SANITIZER
#define TANDEM_ADDRESS_SANITIZER 0
#endif

#endif  // TANDEM_TESTS_ADDRESS_SANITIZER_H_
