/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libmcloc: ftrace for a running userspace program.
 *
 * A program built with -pg -mfentry, recordmcount after each cc, and linked
 * through `objpatch link --nop --runtime` starts with every call site a
 * NOP.  Registering an ops turns the sites it covers into calls to the
 * image's trampolines, while the program's threads keep running;
 * unregistering turns them back.  See man/libmcloc.3.
 *
 * Every function returns 0 or a negative errno; the reason goes to the log
 * callback (mcloc_set_log), never to stderr.
 */
#ifndef MCLOC_H
#define MCLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; this is its interface. */
#define MCLOC_API __attribute__((visibility("default")))

struct mcloc_ops;
struct mcloc_regs;	/* include/mcloc/abi.h: every register, and pc */

/*
 * IP is the traced function's call site (its entry), PARENT_IP the return
 * address into its caller.  REGS is NULL unless the ops asked for
 * MCLOC_OPS_SAVE_REGS; then every register is there and the callback may
 * change them, pc included (where the function resumes).
 */
typedef void (*mcloc_func_t)(uintptr_t ip, uintptr_t parent_ip, struct mcloc_ops *ops,
			     struct mcloc_regs *regs);

enum {
	MCLOC_OPS_SAVE_REGS = 1 << 0,
};

/*
 * SZ: sizeof(struct mcloc_ops) as the caller compiled it, so that later
 * versions can add fields at the end (as libbpf's opts do); 0 means the
 * size of this, the first version.  A larger SZ is refused (-E2BIG) when
 * the fields this library does not know are not all zero.
 */
struct mcloc_ops {
	size_t sz;
	mcloc_func_t func;
	unsigned flags;
	void *private;			/* the caller's */
	struct mcloc_ops_priv *priv;	/* the library's; zero before first use */
};

/* Set up (also done on first use): the SIGTRAP handler, membarrier. */
MCLOC_API int mcloc_init(void);

/*
 * Filters, changed at any time: a registered OPS's sites follow at once,
 * in one batch of only the sites that change (a call in flight sees the
 * coverage from before or after).  GLOBS is a comma- or space-separated
 * list of fnmatch(3) patterns over function names; a pattern "!pat"
 * removes matches instead.  An empty
 * filter means every function; notrace wins over filter.  RESET clears the
 * set first.  Returns how many functions the set now holds, or -errno:
 * -ENOENT, with the sets unchanged, when a pattern matches no function
 * (as ftrace refuses one).
 */
MCLOC_API int mcloc_set_filter(struct mcloc_ops *ops, const char *globs, int reset);
MCLOC_API int mcloc_set_notrace(struct mcloc_ops *ops, const char *globs, int reset);
/* The same by exact call-site or function address. */
MCLOC_API int mcloc_set_filter_ip(struct mcloc_ops *ops, uintptr_t ip, int remove);

/* Register or unregister, from any thread, at any time.  When
 * mcloc_unregister_ops() returns, no thread is inside OPS's callback or
 * will enter it again: OPS may be freed. */
MCLOC_API int mcloc_register_ops(struct mcloc_ops *ops);
MCLOC_API int mcloc_unregister_ops(struct mcloc_ops *ops);
/* Release what the library allocated for an unregistered OPS. */
MCLOC_API void mcloc_ops_free(struct mcloc_ops *ops);

/*
 * Live patching built on MCLOC_OPS_SAVE_REGS: every call of FROM that
 * starts after mcloc_redirect() returns runs TO instead (a function of the
 * same signature); mcloc_unredirect(FROM) restores FROM.  FROM must be a
 * traced function whose site is at its entry.  -EEXIST if FROM is
 * already redirected; -EOPNOTSUPP if its site follows the prologue (-pg
 * without -mfentry), where FROM's frame is already built.
 */
MCLOC_API int mcloc_redirect(void *from, void *to);
MCLOC_API int mcloc_unredirect(void *from);

/*
 * The built-in tracers (also started by MCLOC_TRACER at load): WHICH is
 * "function" (a line per call, ftrace's format) or "profile" (calls per
 * function, written when stopped).  FILTER and NOTRACE are globs as for
 * mcloc_set_filter (NULL: none); output goes to a dup of FD (-1: stderr).
 * mcloc_tracer_stop() writes out everything buffered.
 */
MCLOC_API int mcloc_tracer_start(const char *which, const char *filter, const char *notrace, int fd);
MCLOC_API void mcloc_tracer_stop(void);

/*
 * The control channel (also started by MCLOC_CONTROL=1 at load): a socket
 * that the mcloc(1) command, run by the same user or root, talks to while
 * the program runs.  <mcloc/control.h> is its protocol.  Starting it
 * twice is harmless; -EPERM when its directory is not the user's alone.
 */
MCLOC_API int mcloc_control_start(void);
MCLOC_API void mcloc_control_stop(void);

/*
 * Direct calls, as the kernel's register_ftrace_direct(): the site of IP
 * (a call site, or a function's address) calls TRAMP, an assembly
 * function of yours, with nothing of ours in between when no ops covers
 * the site too and TRAMP is within the site's reach; otherwise the image's
 * trampoline enters TRAMP after the ops's callbacks.  TRAMP is entered as
 * the site's call would enter it, and must return to the function with
 * the argument registers, the callee-saved ones and the stack intact:
 *   x86_64   called: the stack holds the return into the function and
 *            above it the caller's; end with ret.  May clobber %r11 and
 *            the flags.
 *   aarch64  x30 = the return into the function, x9 = the caller's
 *            return address; end with "mov x16, x30; mov x30, x9; ret x16"
 *            or equivalent.  May clobber x16, x17 (IP0, IP1).
 *   riscv64  t0 = the return into the function, ra = the caller's; end
 *            with "jr t0".  May clobber t1-t6.
 * -EEXIST: the site has a direct trampoline already; -EOPNOTSUPP: its
 * image was linked with an objpatch older than this ABI (version 3).
 * After mcloc_unregister_direct() returns no call that starts later
 * enters TRAMP; keep its code mapped (a call already past the site may
 * still be on its way in).
 */
MCLOC_API int mcloc_register_direct(uintptr_t ip, void *tramp);
MCLOC_API int mcloc_unregister_direct(uintptr_t ip, void *tramp);

/* Messages: LEVEL 0 error, 1 warning, 2 info.  NULL: drop them. */
MCLOC_API void mcloc_set_log(void (*log)(int level, const char *msg));

/* The caller sets SZ to sizeof(struct mcloc_stats); the library fills in
 * the fields that fit in SZ bytes, so a newer header works with an older
 * library and the other way round.  -EINVAL when SZ does not cover one
 * field. */
struct mcloc_stats {
	size_t sz;
	size_t images, records, enabled, refused;
	size_t record_bytes;	/* memory of all records */
	size_t batches, sites_patched, syncs;
	double last_batch_ms;	/* the last batch, from its first decision to its last sync */
	size_t direct;		/* of the enabled, those calling one ops directly */
	/* Every store into text since start: instructions (a site's change
	 * is one on aarch64 and riscv64, its bytes on x86_64), and ops slots
	 * (aarch64, riscv64). */
	size_t insn_stores, slot_stores;
	/* Traced calls that walked the list of ops (ftrace's list function)
	 * rather than reaching their one ops directly. */
	size_t list_calls;
	/* Sites that call a direct trampoline of mcloc_register_direct()
	 * itself (the others with one go through the list). */
	size_t direct_tramps;
};
MCLOC_API int mcloc_get_stats(struct mcloc_stats *st);

/* The function name of a call site (or NULL), and the site of a function
 * name (0 if none). */
MCLOC_API const char *mcloc_site_name(uintptr_t ip);
/* The function containing ADDR (any address), and the offset into it. */
MCLOC_API const char *mcloc_addr_name(uintptr_t addr, uintptr_t *off);
MCLOC_API uintptr_t mcloc_site_of(const char *name);

#ifdef __cplusplus
}
#endif
#endif
