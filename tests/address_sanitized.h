/*
 * ADDRESS_SANITIZED: 1 in a build with AddressSanitizer. Its own memory shows in RssAnon beside
 * the engine's (a shadow byte for every 8 of heap, its allocator's redzones and per-size-class
 * regions), so the tests that hold the engine's memory to the process's keep those bounds to
 * builds without it.
 */
#ifndef CORRAL_TESTS_ADDRESS_SANITIZED_H
#define CORRAL_TESTS_ADDRESS_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define ADDRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADDRESS_SANITIZED 1
#endif
#endif
#ifndef ADDRESS_SANITIZED
#define ADDRESS_SANITIZED 0
#endif

#endif
