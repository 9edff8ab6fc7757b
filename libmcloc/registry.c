// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's image registry: an image's constructor registers it, its
 * destructor takes it away; and the statistics over what is registered.
 * (images.c reads an image's records and names; ops.c covers its sites.)
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "patch.h"
#include "rcu.h"
#include "dispatch.h"
#include "ops.h"
#include "registry.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- registering images ---------------------------------------------------- */

uint8_t *mcr_near_page(uintptr_t lo, uintptr_t hi)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (uintptr_t step = 0; step < (1ul << 30); step += 2ul << 20)
		for (int side = 0; side < 2; side++) {
			uintptr_t at = side ? ((lo - step - (uintptr_t)pg) & ~(uintptr_t)(pg - 1))
					    : ((hi + step + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1));
			void *p = mmap((void *)at, (size_t)pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

			if (p == MAP_FAILED)
				continue;
			if ((uintptr_t)p == at)
				return p;
			munmap(p, (size_t)pg);
		}
	return NULL;
}

/* IM's page of direct stubs, all written now and never again; NULL (its
 * sites then go through the args trampoline) when no page is in reach. */
static uint8_t *direct_page(const struct image *im)
{
#if MCR_ONE_STORE
	(void)im;
	return NULL;	/* (the sites' ops slots do this job) */
#else
	uint8_t *pg = im->nrecs ? mcr_near_page(im->lo, im->hi + MCR_MAX_SITE) : NULL;

	if (!pg)
		return NULL;
	for (size_t i = 0; i < MCR_DIRECT_PAGE / MCR_DIRECT_STUB; i++)
		mcr_direct_stub(pg + i * MCR_DIRECT_STUB, (uintptr_t)mcr_direct_tramp);
	if (mprotect(pg, MCR_DIRECT_PAGE, PROT_READ | PROT_EXEC)) {
		munmap(pg, MCR_DIRECT_PAGE);
		return NULL;
	}
	return pg;
#endif
}

/*
 * An image's constructor and destructor call these, under the dynamic
 * loader's lock, while other threads may run callbacks: nothing here
 * waits for a grace period (a reader could be waiting for that lock, as
 * a callback calling dladdr() once did).  Registering publishes the
 * image, lets the hooks see it (the environment's tracer extends its
 * filter to it), and patches its sites for the ops that cover it, which
 * waits for no reader; what that replaces is retired with mcr_defer().
 * Unregistering takes the image out of the table and retires its memory
 * the same way.
 */
int mcloc_register_image(struct mcloc_image *desc)
{
	struct image im = { .desc = desc, .base = desc->base };
	int ret = 0;

	/* Version 2 images work, but their trampolines cannot enter a
	 * direct trampoline from the list. */
	if (desc->magic != MCLOC_IMAGE_MAGIC || desc->version < 2 ||
	    desc->version > MCLOC_IMAGE_VERSION) {
		/* (An image linked for a newer library runs untraced: said,
		 * since nothing else would.) */
		Dl_info di = { 0 };

		dladdr(desc, &di);
		mcr_warn("%s: image ABI version %u, not %d to %d: not traced (%s)",
			 di.dli_fname && *di.dli_fname ? di.dli_fname : "an image", desc->version, 2,
			 MCLOC_IMAGE_VERSION,
			 desc->magic != MCLOC_IMAGE_MAGIC ? "a damaged descriptor" :
			 desc->version > MCLOC_IMAGE_VERSION ? "linked for a newer libmcloc" :
							       "linked for an older libmcloc");
		return -EINVAL;
	}
	im.version = desc->version;
	pthread_mutex_lock(&mcr_lock);
	struct image *slot = calloc(1, sizeof(*slot));
	size_t at = 0;

	while (at < mcr_nimages && mcr_images[at])
		at++;
	if (!slot || at == MCR_MAX_IMAGES) {
		free(slot);
		ret = slot ? -ENOSPC : -ENOMEM;
		goto out;
	}
	size_t refused = mcr_nrefused;

	ret = mcr_image_records(&im, desc);
	if (ret) {
		free(slot);
		goto out;
	}
	/* A descriptor registered already, or another naming the same
	 * sites (a copy of one): its sites would have two records each,
	 * counted, filtered and patched twice. */
	for (size_t i = 0; i < mcr_nimages && !ret; i++) {
		const struct image *o = mcr_images[i];

		if (o && (o->desc == desc ||
			  (im.nrecs && o->nrecs && im.lo <= o->hi && o->lo <= im.hi)))
			ret = -EEXIST;
	}
	if (ret) {
		mcr_nrefused = refused;	/* (counted with the first) */
		*slot = im;
		mcr_image_free(slot);
		goto out;
	}
	im.first = mcr_nrecords;
	if (!im.stubs)
		im.stubs = direct_page(&im);
#if !MCR_ONE_STORE
	else	/* (before any site can call one: none is enabled yet) */
		desc->direct_tramp = (uintptr_t)mcr_direct_tramp;
#endif
	if (im.nrecs && !im.stubs && !MCR_ONE_STORE)
		mcr_say(1, "no page for direct stubs within reach; single ops go through the list");
	const char *path = mcr_image_name(&im, desc);

	if (im.nskipped)
		mcr_warn("%s: %zu site%s skipped: %s", path ? path : "an image", im.nskipped,
			 im.nskipped == 1 ? "" : "s", im.skip_why);

	*slot = im;
	__atomic_store_n(&mcr_images[at], slot, __ATOMIC_RELEASE);
	if (at == mcr_nimages)
		__atomic_store_n(&mcr_nimages, mcr_nimages + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&mcr_images_gen, mcr_images_gen + 1, __ATOMIC_RELEASE);
	mcr_nrecords += im.nrecs;
	/* Before the handlers: a dispatcher finds the image through it. */
	__atomic_store_n(&desc->lib, slot, __ATOMIC_RELEASE);
	desc->args_handler = mcr_args_dispatch;
	desc->regs_handler = mcr_regs_dispatch;
	mcr_say(2, "image %s: %zu sites", path ? path : "?", im.nrecs);
out:
	pthread_mutex_unlock(&mcr_lock);
	if (ret)
		return ret;
	/* The hooks first (a filter extended to the image's functions), then
	 * the sites.  (The image stays: only its own destructor, which runs
	 * after this constructor, takes it away.) */
	if (mcr_hooks.image_added)
		mcr_hooks.image_added();
	if (im.nrecs) {
		pthread_mutex_lock(&mcr_lock);
		mcr_cover_new_image();
		pthread_mutex_unlock(&mcr_lock);
	}
	mcr_rcu_try_reclaim();
	return 0;
}

/* A grace period after its image left the table: no dispatcher, name
 * lookup or SIGTRAP handler (each in a read-side section) can still see
 * it, and no site calls its stubs (a site of its own runs only while a
 * thread runs its code, which dlclose() forbids). */
static void image_retire(void *p)
{
	struct image *gone = p;

	if (gone->stubs && !gone->stubs_linked)
		munmap(gone->stubs, MCR_DIRECT_PAGE);
	mcr_image_free(gone);
}

/* Its code is going away (dlclose): out of the table now, its memory
 * once nobody can be reading it.  Its names stay (intern()). */
void mcloc_unregister_image(struct mcloc_image *desc)
{
	struct image *gone = NULL;

	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages && !gone; i++)
		if (mcr_images[i] && mcr_images[i]->desc == desc) {
			gone = mcr_images[i];
			__atomic_store_n(&mcr_images[i], NULL, __ATOMIC_RELEASE);
			__atomic_store_n(&mcr_images_gen, mcr_images_gen + 1, __ATOMIC_RELEASE);
		}
	if (gone) {
		__atomic_store_n(&desc->lib, NULL, __ATOMIC_RELEASE);
		mcr_image_departs(gone, mcr_hooks.keep_departed && mcr_hooks.keep_departed());
	}
	pthread_mutex_unlock(&mcr_lock);
	/* (Without memory to queue it, the image's memory is leaked: safe,
	 * where waiting here is not.) */
	if (gone && mcr_defer(image_retire, gone))
		mcr_say(1, "an unloaded image's memory is leaked: no memory to retire it");
	mcr_rcu_try_reclaim();
}

bool mcr_covers(uintptr_t lo, uintptr_t hi)
{
	bool found = false;

	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages && !found; i++)
		found = mcr_images[i] && mcr_images[i]->nrecs && mcr_images[i]->lo < hi && mcr_images[i]->hi >= lo;
	pthread_mutex_unlock(&mcr_lock);
	return found;
}

int mcloc_get_stats(struct mcloc_stats *out)
{
	struct mcloc_stats all = { .sz = sizeof(all) }, *st = &all;

	if (!out || out->sz < offsetof(struct mcloc_stats, images) + sizeof(out->images))
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages; i++) {
		if (!mcr_images[i])
			continue;
		st->images++;
		st->records += mcr_images[i]->nrecs;
		for (size_t r = 0; r < mcr_images[i]->nrecs; r++) {
			uint32_t s = mcr_images[i]->recs[r].state;

			/* (A parked site keeps its kind bits.) */
			if (!(s & REC_ENABLED))
				continue;
			st->enabled++;
			st->direct += !!(s & REC_ENABLED_DIRECT);
			st->direct_tramps += !!(s & REC_ENABLED_USER);
		}
	}
	st->record_bytes = st->records * sizeof(struct mcloc_rec);
	st->refused = mcr_nrefused;
	st->batches = mcr_stats.batches;
	st->sites_patched = mcr_stats.sites;
	st->syncs = mcr_stats.syncs;
	st->last_batch_ms = mcr_stats.last_batch_ms;
	st->insn_stores = mcr_stats.insn_stores;
	st->slot_stores = mcr_stats.slot_stores;
	st->list_calls = __atomic_load_n(&mcr_list_calls, __ATOMIC_RELAXED);

	pthread_mutex_unlock(&mcr_lock);
	size_t sz = out->sz < sizeof(all) ? out->sz : sizeof(all);

	memcpy((char *)out + sizeof(out->sz), (char *)&all + sizeof(all.sz), sz - sizeof(all.sz));
	return 0;
}
