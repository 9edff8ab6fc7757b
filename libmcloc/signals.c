// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * SIGTRAP kept deliverable, where sites change under a breakpoint
 * (x86_64: patch.c).  A thread that meets a site while its breakpoint is
 * in must run libmcloc's SIGTRAP handler, and the kernel will not let it
 * when the thread holds SIGTRAP or the process ignores it: a synchronous
 * signal then takes its default action, and the process dies with a core
 * (xz -T2 under mcloc trace did, its workers holding every signal).  Nor
 * may the program's own handler take libmcloc's traps.  So the library
 * interposes the calls that set a mask or SIGTRAP's disposition, as the
 * sanitizers' runtimes interpose sigaction() for their own signals:
 *
 *   - a mask asked for with SIGTRAP in it (pthread_sigmask, sigprocmask,
 *     sigsuspend, a handler's sa_mask, a thread attribute's) is applied
 *     without it, and read back so: SIGTRAP is never held while the
 *     library is loaded;
 *   - once libmcloc's handler is in, SIGTRAP's disposition as the program
 *     sets it (sigaction, signal) is kept here: the handler passes it the
 *     traps that are not libmcloc's (forward_trap()), and sigaction()
 *     reads it back as the program set it.
 *
 * glibc's own brief full masks (while it creates a thread, or forks) are
 * made by its internal calls, which nothing interposes; no traced code
 * runs under them.  What still holds SIGTRAP: a thread of a library
 * dlopen()ed before libmcloc was, a mask given to ppoll(), pselect() or
 * epoll_pwait() (a handler that runs meanwhile runs under it), and a raw
 * rt_sigprocmask system call.  libmcloc(3) says so.
 *
 * The definitions carry glibc's symbol versions (libmcloc-glibc.map), or
 * the dynamic linker would not bind a program's versioned calls here;
 * the real calls are the next definitions, libc's.
 */
#include "signals.h"

#include "../arch/runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int mask_fn(int, const sigset_t *, sigset_t *);
typedef int action_fn(int, const struct sigaction *, struct sigaction *);

/* libc's calls this library interposes, or uses itself. */
enum real { R_SIGMASK, R_SIGACTION, R_SIGSUSPEND, R_ATTR_SIGMASK, R_SIGNAL, NREAL };
static const char *const real_names[NREAL] = {
	"pthread_sigmask", "sigaction", "sigsuspend", "pthread_attr_setsigmask_np", "signal",
};
static void *real_fns[NREAL];

/* The next definition of call R after this library's (libc's, or another
 * interposer's on the way to it), looked up once (signals_init()).  Where
 * none comes after it (the library dlopen()ed, or linked after libc),
 * libc's own: the program's calls then go there directly, and so must
 * the library's. */
static void *real(enum real r)
{
	void *f = __atomic_load_n(&real_fns[r], __ATOMIC_ACQUIRE);

	if (!f) {
		f = dlsym(RTLD_NEXT, real_names[r]);
		if (!f) {
			void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);

			f = libc ? dlsym(libc, real_names[r]) : NULL;
			if (libc)
				dlclose(libc);
		}
		__atomic_store_n(&real_fns[r], f, __ATOMIC_RELEASE);
	}
	return f;
}

int mcr_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn *fn = (mask_fn *)real(R_SIGMASK);

	if (fn)
		return fn(how, set, old);
	/* (No libc after us: the system call, which takes the kernel's
	 * sigset size.) */
	return syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8) ? errno : 0;
}

/*
 * As the library loads: libc's calls looked up, here rather than at
 * their first use, which may come with the runtime's lock held (the
 * first batch installs the handler), while dlsym() takes the dynamic
 * linker's lock, under which another thread's dlopen() runs an image's
 * constructor that waits for the runtime's lock.  And a program started
 * with SIGTRAP held (a mask kept across exec) lets go of it before its
 * code runs, and before it makes threads that would inherit it.  (A
 * constructor of the library's that runs first and patches looks its
 * calls up then: it holds the dynamic linker's lock already.)
 */
__attribute__((constructor(101))) static void signals_init(void)
{
	sigset_t trap;

	for (int r = 0; r < NREAL; r++)
		real((enum real)r);
	if (!MCR_ONE_STORE) {
		sigemptyset(&trap);
		sigaddset(&trap, SIGTRAP);
		mcr_sigmask(SIG_UNBLOCK, &trap, NULL);
	}
}

#if MCR_ONE_STORE
void mcr_signals_fork(enum mcr_fork stage)
{
	(void)stage;	/* (no SIGTRAP disposition kept) */
}
#else
static int real_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
	action_fn *fn = (action_fn *)real(R_SIGACTION);

	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	return fn(sig, sa, old);
}

/* SET, or a copy of it without SIGTRAP in *COPY. */
static const sigset_t *without_trap(const sigset_t *set, sigset_t *copy)
{
	if (!set || !sigismember(set, SIGTRAP))
		return set;
	*copy = *set;
	sigdelset(copy, SIGTRAP);
	return copy;
}

/*
 * The program's SIGTRAP disposition once the library's handler is in
 * (ours): two copies and a generation, so that a handler reads a whole
 * one while the program sets the other.  Setters take WRITING, with
 * their signals held (a handler of theirs cannot then wait on it); a
 * handler only reads.
 */
static struct sigaction prog_trap[2];
static unsigned trap_gen;
static bool ours;
static int writing;

static void read_prog(struct sigaction *out)
{
	unsigned g;

	do {
		g = __atomic_load_n(&trap_gen, __ATOMIC_ACQUIRE);
		memcpy(out, &prog_trap[g & 1], sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&trap_gen, __ATOMIC_RELAXED) != g);
}

static void write_prog(const struct sigaction *sa)
{
	unsigned g = __atomic_load_n(&trap_gen, __ATOMIC_RELAXED);

	memcpy(&prog_trap[(g + 1) & 1], sa, sizeof(*sa));
	__atomic_store_n(&trap_gen, g + 1, __ATOMIC_RELEASE);
}

static void begin_write(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	mcr_sigmask(SIG_SETMASK, &all, old);
	while (__atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void end_write(const sigset_t *old)
{
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	mcr_sigmask(SIG_SETMASK, old, NULL);
}

void mcr_signals_fork(enum mcr_fork stage)
{
	if (stage == MCR_FORK_CHILD)
		__atomic_store_n(&writing, 0, __ATOMIC_RELAXED);
}

int mcr_trap_install(void (*handler)(int, siginfo_t *, void *))
{
	struct sigaction sa, prev;
	sigset_t old;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	begin_write(&old);
	ret = real_sigaction(SIGTRAP, &sa, &prev);
	if (!ret && !ours) {
		write_prog(&prev);
		__atomic_store_n(&ours, true, __ATOMIC_RELEASE);
	}
	end_write(&old);
	return ret;
}

void mcr_trap_forward(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction p;
	sigset_t old;

	read_prog(&p);
	if (!(p.sa_flags & SA_SIGINFO) && p.sa_handler == SIG_IGN)
		return;
	if (!(p.sa_flags & SA_SIGINFO) && p.sa_handler == SIG_DFL) {
		/* As if we had never been here: the default action. */
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		real_sigaction(SIGTRAP, &dfl, NULL);
		raise(SIGTRAP);
		return;
	}
	if (p.sa_flags & SA_RESETHAND) {	/* (a handler for one trap) */
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		begin_write(&old);
		write_prog(&dfl);
		end_write(&old);
	}
	/* The program's handler under the mask it asked for (but SIGTRAP). */
	sigset_t mask;
	const sigset_t *m = without_trap(&p.sa_mask, &mask);

	mcr_sigmask(SIG_BLOCK, m, &old);
	if (p.sa_flags & SA_SIGINFO)
		p.sa_sigaction(sig, si, ctx);
	else
		p.sa_handler(sig);
	mcr_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- the interposed calls ------------------------------------------ */

#define EXPORT __attribute__((visibility("default")))

EXPORT __attribute__((symver("pthread_sigmask@@GLIBC_2.32"), symver("pthread_sigmask@GLIBC_2.2.5")))
int mcr_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;

	return mcr_sigmask(how, how == SIG_UNBLOCK ? set : without_trap(set, &copy), old);
}

EXPORT __attribute__((symver("sigprocmask@@GLIBC_2.2.5")))
int mcr_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int e = mcr_pthread_sigmask(how, set, old);

	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

EXPORT __attribute__((symver("sigsuspend@@GLIBC_2.2.5")))
int mcr_sigsuspend(const sigset_t *mask)
{
	int (*fn)(const sigset_t *) = (int (*)(const sigset_t *))real(R_SIGSUSPEND);
	sigset_t copy;

	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	return fn(without_trap(mask, &copy));
}

EXPORT __attribute__((symver("pthread_attr_setsigmask_np@@GLIBC_2.32")))
int mcr_pthread_attr_setsigmask_np(pthread_attr_t *attr, const sigset_t *set)
{
	int (*fn)(pthread_attr_t *, const sigset_t *) =
		(int (*)(pthread_attr_t *, const sigset_t *))real(R_ATTR_SIGMASK);
	sigset_t copy;

	return fn ? fn(attr, without_trap(set, &copy)) : ENOSYS;
}

EXPORT __attribute__((symver("sigaction@@GLIBC_2.2.5")))
int mcr_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
	struct sigaction copy;
	sigset_t held;

	if (sa && sigismember(&sa->sa_mask, SIGTRAP)) {
		copy = *sa;
		sigdelset(&copy.sa_mask, SIGTRAP);
		sa = &copy;
	}
	if (sig != SIGTRAP)
		return real_sigaction(sig, sa, old);
	begin_write(&held);
	int ret = 0;
	if (!__atomic_load_n(&ours, __ATOMIC_ACQUIRE)) {
		ret = real_sigaction(sig, sa, old);
	} else {
		if (old)
			read_prog(old);
		if (sa)
			write_prog(sa);
	}
	end_write(&held);
	return ret;
}

EXPORT __attribute__((symver("signal@@GLIBC_2.2.5")))
sighandler_t mcr_signal(int sig, sighandler_t handler)
{
	sighandler_t (*fn)(int, sighandler_t) = (sighandler_t (*)(int, sighandler_t))real(R_SIGNAL);

	if (sig == SIGTRAP && __atomic_load_n(&ours, __ATOMIC_ACQUIRE)) {
		/* glibc's signal(): BSD semantics. */
		struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;

		sigemptyset(&sa.sa_mask);
		if (mcr_sigaction(sig, &sa, &old))
			return SIG_ERR;
		return old.sa_handler;
	}
	if (!fn) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return fn(sig, handler);
}
#endif
