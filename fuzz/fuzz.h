/*
 * Shared by the libFuzzer harnesses and the plain replay driver: each
 * harness defines LLVMFuzzerTestOneInput() and checks properties with
 * FUZZ_CHECK, which prints the failed property and aborts, so libFuzzer
 * saves the input and the replay test (make test) fails on it.
 */
#ifndef RESIL_FUZZ_H
#define RESIL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                             \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: property failed: %s\n  ", \
			    __FILE__, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                     \
			fputc('\n', stderr);                              \
			abort();                                          \
		}                                                         \
	} while (0)

#endif
