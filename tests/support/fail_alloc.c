#include "support/fail_alloc.h"

#include <stdlib.h>
#include <string.h>

/* Each block carries its size in front, to check the size given to free. */
typedef struct header {
	size_t size;
	size_t pad;
} header;

static void *
fa_alloc(size_t size, void *ctx)
{
	fail_alloc *fa = ctx;
	header *h;

	fa->allocs++;
	if (fa->fail_at != 0 && fa->allocs == fa->fail_at) {
		fa->failures++;
		return NULL;
	}
	h = malloc(sizeof(*h) + size);
	if (h == NULL)
		return NULL;
	h->size = size;
	fa->live_bytes += size;
	return h + 1;
}

static void
fa_free(void *ptr, size_t size, void *ctx)
{
	fail_alloc *fa = ctx;
	header *h;

	if (ptr == NULL)
		return;
	h = (header *)ptr - 1;
	if (h->size != size)
		fa->size_mismatch = 1;
	fa->live_bytes -= h->size;
	fa->frees++;
	free(h);
}

const resil_allocator *
fail_alloc_init(fail_alloc *fa, uint64_t fail_at)
{
	memset(fa, 0, sizeof(*fa));
	fa->fail_at = fail_at;
	fa->hook.alloc = fa_alloc;
	fa->hook.free = fa_free;
	fa->hook.ctx = fa;
	return &fa->hook;
}

void
fail_alloc_arm(fail_alloc *fa, uint64_t nth)
{
	fa->fail_at = nth == 0 ? 0 : fa->allocs + nth;
}

uint64_t
fail_alloc_live(const fail_alloc *fa)
{
	return fa->allocs - fa->failures - fa->frees;
}
