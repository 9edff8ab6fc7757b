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
 *   - a mask asked for with SIGTRAP in it is applied without it, and read
 *     back so: pthread_sigmask, sigprocmask, sigsuspend, a handler's
 *     sa_mask, a thread attribute's (pthread_attr_setsigmask_np), and the
 *     old BSD and System V calls (sighold, sigblock, sigsetmask,
 *     sigpause); SIGTRAP is never held while the library is loaded;
 *   - once libmcloc's handler is in, SIGTRAP's disposition as the program
 *     sets it is kept here, by sigaction and by every call that sets one
 *     (signal, bsd_signal, ssignal, sysv_signal, which strict ISO C's
 *     signal() is, sigset, sigignore, siginterrupt): the handler passes
 *     it the traps that are not libmcloc's (mcr_trap_forward()), and
 *     sigaction() reads it back as the program set it;
 *   - a SIGEV_THREAD timer's callback, which glibc runs in a thread that
 *     holds every signal, lets go of SIGTRAP first (timer_create).
 *
 * glibc's own brief full masks (while it creates a thread, or forks) are
 * made by its internal calls, which nothing interposes; no traced code
 * runs under them.  What still holds SIGTRAP, libmcloc(3) lists.
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
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* libc's calls this library interposes, or uses itself. */
enum real {
	R_SIGMASK, R_SIGACTION, R_SIGSUSPEND, R_ATTR_SIGMASK, R_SIGNAL, R_SIGSET, R_SIGIGNORE,
	R_SIGINTERRUPT, R_SIGHOLD, R_SIGBLOCK, R_SIGSETMASK, R_SIGPAUSE, R_SIGPAUSE2,
	R_SYSV_SIGNAL, R_TIMER_CREATE, R_LONGJMP, R_LONGJMP_CHK, NREAL
};
static const char *const real_names[NREAL] = {
	"pthread_sigmask", "sigaction", "sigsuspend", "pthread_attr_setsigmask_np", "signal",
	"sigset", "sigignore", "siginterrupt", "sighold", "sigblock", "sigsetmask", "sigpause",
	"__sigpause", "__sysv_signal", "timer_create", "longjmp", "__longjmp_chk",
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

typedef int mask_fn(int, const sigset_t *, sigset_t *);
typedef int action_fn(int, const struct sigaction *, struct sigaction *);

int mcr_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn *fn = (mask_fn *)real(R_SIGMASK);

	if (fn)
		return fn(how, set, old);
	/* (No libc after us: the system call, which takes the kernel's
	 * sigset size.) */
	return syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8) ? errno : 0;
}

/* Whether the program's calls come here (the library loaded with the
 * program, or preloaded), rather than to libc's (dlopen()ed). */
static bool interposed;

bool mcr_signals_interposed(void)
{
	return interposed || MCR_ONE_STORE;
}
/* The process these definitions serve: a vfork() child, which shares the
 * memory but has a disposition table of its own, sets its own. */
static pid_t serving;

#if !MCR_ONE_STORE
int mcr_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
/* Set by each call that reaches mcr_pthread_sigmask(). */
static bool reached;
#endif

#if !MCR_ONE_STORE
/* This thread's SIGTRAP let go of. */
static void let_trap_go(void)
{
	sigset_t trap;

	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	mcr_sigmask(SIG_UNBLOCK, &trap, NULL);
}
#endif

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
	for (int r = 0; r < NREAL; r++)
		real((enum real)r);
	serving = getpid();
#if !MCR_ONE_STORE
	/* A call through the global name comes here, through any other
	 * interposer before us (a sanitizer's), or goes to libc directly. */
	mask_fn *global = (mask_fn *)dlsym(RTLD_DEFAULT, "pthread_sigmask");
	sigset_t now;

	if (global)
		global(SIG_BLOCK, NULL, &now);
	interposed = __atomic_load_n(&reached, __ATOMIC_RELAXED);
	let_trap_go();
#endif
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

/* An old-style mask (a bit per signal) without SIGTRAP's. */
static int without_trap_bit(int mask)
{
	return mask & ~(1 << (SIGTRAP - 1));
}

/*
 * The program's SIGTRAP disposition once the library's handler is in
 * (ours): two copies and a generation, so that a handler reads a whole
 * one while the program sets the other.  Setters take WRITING, with
 * their signals held and cancellation off (a handler of theirs, or their
 * cancellation, cannot then leave it taken); a handler only reads.
 */
static struct sigaction prog_trap[2];
static unsigned trap_gen;
static bool ours;
static int writing;
static void (*our_handler)(int, siginfo_t *, void *);

static void read_prog(struct sigaction *out)
{
	unsigned g;

	do {
		g = __atomic_load_n(&trap_gen, __ATOMIC_ACQUIRE);
		memcpy(out, &prog_trap[g & 1], sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&trap_gen, __ATOMIC_RELAXED) != g);
}

struct write_state {
	sigset_t mask;
	int cancel;
};

static void begin_write(struct write_state *ws)
{
	sigset_t all;

	sigfillset(&all);
	mcr_sigmask(SIG_SETMASK, &all, &ws->mask);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ws->cancel);
	while (__atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void end_write(const struct write_state *ws)
{
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	pthread_setcancelstate(ws->cancel, NULL);
	mcr_sigmask(SIG_SETMASK, &ws->mask, NULL);
}

/* Install the library's handler, restarting system calls as the
 * program's disposition P asks (a handler of its own without SA_RESTART
 * interrupts them). */
static int install(const struct sigaction *p)
{
	struct sigaction sa;
	bool handler = (p->sa_flags & SA_SIGINFO) ||
		       (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = our_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER |
		      (handler && !(p->sa_flags & SA_RESTART) ? 0 : SA_RESTART);
	sigemptyset(&sa.sa_mask);
	return real_sigaction(SIGTRAP, &sa, NULL);
}

/* Under WRITING: the program's disposition is now SA. */
static void write_prog(const struct sigaction *sa)
{
	unsigned g = __atomic_load_n(&trap_gen, __ATOMIC_RELAXED);

	memcpy(&prog_trap[(g + 1) & 1], sa, sizeof(*sa));
	__atomic_store_n(&trap_gen, g + 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&ours, __ATOMIC_RELAXED))
		install(sa);
}

static void timer_lock_fork(enum mcr_fork stage);

void mcr_signals_fork(enum mcr_fork stage)
{
	timer_lock_fork(stage);
	if (stage == MCR_FORK_CHILD) {
		__atomic_store_n(&writing, 0, __ATOMIC_RELAXED);
		serving = getpid();
	}
}

int mcr_trap_install(void (*handler)(int, siginfo_t *, void *))
{
	struct sigaction prev;
	struct write_state ws;
	int ret;

	begin_write(&ws);
	/* The program's disposition is kept before the handler goes in: a
	 * SIGTRAP that comes between finds it. */
	ret = real_sigaction(SIGTRAP, NULL, &prev);
	if (!ret && !ours) {
		our_handler = handler;
		write_prog(&prev);
		ret = install(&prev);
		if (!ret)
			__atomic_store_n(&ours, true, __ATOMIC_RELEASE);
	}
	end_write(&ws);
	return ret;
}

/*
 * A SIGTRAP sent while the program's handler runs on this thread, which
 * the kernel would hold until it returns (the handler without
 * SA_NODEFER): the library's handler cannot hold it (its own traps must
 * come in there too), so it is kept here and handled when the program's
 * returns, once however many came, as a standard signal is.  A handler
 * left by longjmp() no longer runs (the interposed longjmp() says so).
 */
static __thread bool in_prog, deferred;
static __thread struct {
	int code;
	pid_t pid;
	uid_t uid;
	union sigval value;
} deferred_si;

void mcr_trap_forward(int sig, siginfo_t *si, void *ctx)
{
	struct sigaction p;
	struct write_state ws;
	siginfo_t again;
	sigset_t old;

	for (;;) {
		read_prog(&p);
		bool dfl = !(p.sa_flags & SA_SIGINFO) && p.sa_handler == SIG_DFL;
		bool ign = !(p.sa_flags & SA_SIGINFO) && p.sa_handler == SIG_IGN;

		/* The kernel gives a trap it raised itself (an int3, a single
		 * step: si_code > 0) its default action where it is ignored;
		 * one sent is dropped. */
		if (ign && si->si_code <= 0)
			return;
		if (dfl || ign) {
			/* As if we had never been here: the default action. */
			struct sigaction sa = { .sa_handler = SIG_DFL };

			real_sigaction(SIGTRAP, &sa, NULL);
			raise(SIGTRAP);
			return;
		}
		if (in_prog && !(p.sa_flags & SA_NODEFER) && si->si_code <= 0) {
			deferred_si.code = si->si_code;
			deferred_si.pid = si->si_pid;
			deferred_si.uid = si->si_uid;
			deferred_si.value = si->si_value;
			deferred = true;
			return;
		}
		if (p.sa_flags & SA_RESETHAND) {	/* (a handler for one trap) */
			struct sigaction sa = { .sa_handler = SIG_DFL };

			begin_write(&ws);
			write_prog(&sa);
			end_write(&ws);
		}
		/* The program's handler under the mask it asked for (but
		 * SIGTRAP). */
		sigset_t mask;
		const sigset_t *m = without_trap(&p.sa_mask, &mask);
		bool was = in_prog;

		mcr_sigmask(SIG_BLOCK, m, &old);
		in_prog = true;
		if (p.sa_flags & SA_SIGINFO)
			p.sa_sigaction(sig, si, ctx);
		else
			p.sa_handler(sig);
		in_prog = was;
		mcr_sigmask(SIG_SETMASK, &old, NULL);
		if (!deferred || was)
			return;
		/* (A loop, not a call: a storm of them must not grow the
		 * stack.) */
		deferred = false;
		memset(&again, 0, sizeof(again));
		again.si_signo = SIGTRAP;
		again.si_code = deferred_si.code;
		again.si_pid = deferred_si.pid;
		again.si_uid = deferred_si.uid;
		again.si_value = deferred_si.value;
		si = &again;
	}
}

/*
 * SIGEV_THREAD timers: each callback and its value, kept for the life of
 * the process (glibc may start a callback after timer_delete() returns,
 * and the trampoline reads them then), one per pair: a program that
 * creates timers over and over with the same callback and value keeps
 * one.  A table that doubles as it fills, so that a program that gives
 * each timer a value of its own does not make each creation longer.
 */
struct timer_cb {
	void (*fn)(union sigval);
	union sigval value;
	struct timer_cb *next;
};
static struct timer_cb **timer_cbs;
static size_t timer_nb, timer_n;	/* buckets (a power of two), pairs */
static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;

static void timer_lock_fork(enum mcr_fork stage)
{
	mcr_fork_lock(&timer_lock, stage);
}

static size_t timer_hash(void (*fn)(union sigval), union sigval value, size_t nb)
{
	uint64_t h = (uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)(uintptr_t)value.sival_ptr * 0xc2b2ae3d27d4eb4full;

	return (size_t)(h ^ h >> 29) & (nb - 1);
}

/* Under timer_lock: twice the buckets (or, out of memory, as many). */
static void timer_grow(void)
{
	size_t nb = timer_nb ? 2 * timer_nb : 64;
	struct timer_cb **t = calloc(nb, sizeof(*t));

	if (!t)
		return;
	for (size_t i = 0; i < timer_nb; i++)
		for (struct timer_cb *c = timer_cbs[i], *next; c; c = next) {
			size_t h = timer_hash(c->fn, c->value, nb);

			next = c->next;
			c->next = t[h];
			t[h] = c;
		}
	free(timer_cbs);
	timer_cbs = t;
	timer_nb = nb;
}

static struct timer_cb *timer_cb_of(void (*fn)(union sigval), union sigval value)
{
	struct timer_cb *c = NULL;

	pthread_mutex_lock(&timer_lock);
	if (timer_n >= timer_nb)
		timer_grow();
	if (timer_nb) {
		size_t h = timer_hash(fn, value, timer_nb);

		for (c = timer_cbs[h]; c; c = c->next)
			if (c->fn == fn && c->value.sival_ptr == value.sival_ptr)
				break;
		if (!c && (c = malloc(sizeof(*c)))) {
			*c = (struct timer_cb){ fn, value, timer_cbs[h] };
			timer_cbs[h] = c;
			timer_n++;
		}
	}
	pthread_mutex_unlock(&timer_lock);
	return c;
}

static void timer_trampoline(union sigval v)
{
	const struct timer_cb *c = v.sival_ptr;

	let_trap_go();
	c->fn(c->value);
}

/* ---- the interposed calls ------------------------------------------ */

/* libc's call R of one int, or ENOSYS without one. */
static int call_int(enum real r, int arg)
{
	int (*fn)(int) = (int (*)(int))real(r);

	return fn ? fn(arg) : (errno = ENOSYS, -1);
}

/* libc's call R that sets SIG's handler, or ENOSYS without one. */
static sighandler_t call_handler(enum real r, int sig, sighandler_t handler)
{
	sighandler_t (*fn)(int, sighandler_t) = (sighandler_t (*)(int, sighandler_t))real(r);

	return fn ? fn(sig, handler) : (errno = ENOSYS, SIG_ERR);
}

#define EXPORT __attribute__((visibility("default")))

/* Whether a call about SIGTRAP's disposition is kept here (under
 * WRITING).  A child that vfork() or _Fork() made (no fork handler ran
 * in it) has a table of its own: it sets its own. */
static bool kept(void)
{
	return __atomic_load_n(&ours, __ATOMIC_ACQUIRE) && getpid() == serving;
}

/* SIGTRAP's disposition, read into OLD and set from SA, under WRITING:
 * kept here, or libc's. */
static int trap_action(const struct sigaction *sa, struct sigaction *old)
{
	if (!kept())
		return real_sigaction(SIGTRAP, sa, old);
	if (old)
		read_prog(old);
	if (sa)
		write_prog(sa);
	return 0;
}

EXPORT __attribute__((symver("pthread_sigmask@@GLIBC_2.32"), symver("pthread_sigmask@GLIBC_2.2.5")))
int mcr_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;

	__atomic_store_n(&reached, true, __ATOMIC_RELAXED);
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

EXPORT __attribute__((symver("sigsuspend@@GLIBC_2.2.5"), symver("__sigsuspend@@GLIBC_2.2.5")))
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

EXPORT __attribute__((symver("sigaction@@GLIBC_2.2.5"), symver("__sigaction@@GLIBC_2.2.5")))
int mcr_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
	struct sigaction copy;
	struct write_state ws;

	if (sa && sigismember(&sa->sa_mask, SIGTRAP)) {
		copy = *sa;
		sigdelset(&copy.sa_mask, SIGTRAP);
		sa = &copy;
	}
	if (sig != SIGTRAP)
		return real_sigaction(sig, sa, old);
	begin_write(&ws);
	int ret = trap_action(sa, old);
	end_write(&ws);
	return ret;
}

/* SIGTRAP's disposition set to HANDLER with FLAGS, as the signal()
 * family sets one, whether it is kept here or not (libc's setters take
 * no part: a setter racing the handler's install could otherwise lose
 * the program's disposition, or put it in the library's place).  The
 * old handler returned, or SIG_ERR with errno. */
static sighandler_t set_trap(sighandler_t handler, int flags)
{
	struct sigaction sa = { .sa_handler = handler, .sa_flags = flags }, old;
	struct write_state ws;

	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&sa.sa_mask);
	begin_write(&ws);
	int ret = trap_action(&sa, &old);
	end_write(&ws);
	return ret ? SIG_ERR : old.sa_handler;
}

/* siginterrupt(SIGTRAP, 1) given: signal() sets SIGTRAP's without
 * SA_RESTART, as glibc's does for the signals it names. */
static bool trap_interrupts;

EXPORT __attribute__((symver("signal@@GLIBC_2.2.5"), symver("bsd_signal@@GLIBC_2.2.5"),
		      symver("ssignal@@GLIBC_2.2.5")))
sighandler_t mcr_signal(int sig, sighandler_t handler)
{
	if (sig == SIGTRAP)	/* (BSD semantics, as glibc's) */
		return set_trap(handler, trap_interrupts ? 0 : SA_RESTART);
	return call_handler(R_SIGNAL, sig, handler);
}

EXPORT __attribute__((symver("__sysv_signal@@GLIBC_2.2.5"), symver("sysv_signal@@GLIBC_2.2.5")))
sighandler_t mcr_sysv_signal(int sig, sighandler_t handler)
{
	if (sig == SIGTRAP)	/* (one-shot, as glibc's) */
		return set_trap(handler, SA_RESETHAND | SA_NODEFER);
	return call_handler(R_SYSV_SIGNAL, sig, handler);
}

EXPORT __attribute__((symver("sigset@@GLIBC_2.2.5")))
sighandler_t mcr_sigset(int sig, sighandler_t disp)
{
	if (sig == SIGTRAP && disp != SIG_HOLD)
		return set_trap(disp, 0);
	if (sig == SIGTRAP) {
		/* SIG_HOLD would hold it: the disposition is only read. */
		struct sigaction old;

		return mcr_sigaction(SIGTRAP, NULL, &old) ? SIG_ERR : old.sa_handler;
	}
	return call_handler(R_SIGSET, sig, disp);
}

EXPORT __attribute__((symver("sigignore@@GLIBC_2.2.5")))
int mcr_sigignore(int sig)
{
	if (sig == SIGTRAP)
		return set_trap(SIG_IGN, 0) == SIG_ERR ? -1 : 0;
	return call_int(R_SIGIGNORE, sig);
}

EXPORT __attribute__((symver("siginterrupt@@GLIBC_2.2.5")))
int mcr_siginterrupt(int sig, int flag)
{
	int (*fn)(int, int) = (int (*)(int, int))real(R_SIGINTERRUPT);

	if (sig == SIGTRAP) {
		struct sigaction sa;
		struct write_state ws;
		int ret;

		begin_write(&ws);
		trap_interrupts = flag;
		ret = trap_action(NULL, &sa);
		sa.sa_flags = flag ? sa.sa_flags & ~SA_RESTART : sa.sa_flags | SA_RESTART;
		if (!ret)
			ret = trap_action(&sa, NULL);
		end_write(&ws);
		return ret;
	}
	return fn ? fn(sig, flag) : (errno = ENOSYS, -1);
}

EXPORT __attribute__((symver("sighold@@GLIBC_2.2.5")))
int mcr_sighold(int sig)
{
	return sig == SIGTRAP ? 0 : call_int(R_SIGHOLD, sig);
}

EXPORT __attribute__((symver("sigblock@@GLIBC_2.2.5")))
int mcr_sigblock(int mask)
{
	return call_int(R_SIGBLOCK, without_trap_bit(mask));
}

EXPORT __attribute__((symver("sigsetmask@@GLIBC_2.2.5")))
int mcr_sigsetmask(int mask)
{
	return call_int(R_SIGSETMASK, without_trap_bit(mask));
}

/* BSD's sigpause(MASK): the mask to wait under. */
EXPORT __attribute__((symver("sigpause@@GLIBC_2.2.5")))
int mcr_sigpause(int mask)
{
	return call_int(R_SIGPAUSE, without_trap_bit(mask));
}

/* glibc's inline sigpause(): a mask, or (IS_SIG) one signal to let go of. */
EXPORT __attribute__((symver("__sigpause@@GLIBC_2.2.5")))
int mcr___sigpause(int sig_or_mask, int is_sig)
{
	int (*fn)(int, int) = (int (*)(int, int))real(R_SIGPAUSE2);

	return fn ? fn(is_sig ? sig_or_mask : without_trap_bit(sig_or_mask), is_sig)
		  : (errno = ENOSYS, -1);
}

EXPORT __attribute__((symver("timer_create@@GLIBC_2.34"), symver("timer_create@GLIBC_2.3.3")))
int mcr_timer_create(clockid_t clock, struct sigevent *sev, timer_t *id)
{
	int (*fn)(clockid_t, struct sigevent *, timer_t *) =
		(int (*)(clockid_t, struct sigevent *, timer_t *))real(R_TIMER_CREATE);
	struct timer_cb *c;

	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	if (!sev || sev->sigev_notify != SIGEV_THREAD ||
	    !(c = timer_cb_of(sev->sigev_notify_function, sev->sigev_value)))
		return fn(clock, sev, id);
	struct sigevent copy = *sev;

	copy.sigev_notify_function = timer_trampoline;
	copy.sigev_value.sival_ptr = c;
	return fn(clock, &copy, id);
}
/* A longjmp() out of the program's SIGTRAP handler leaves it: a SIGTRAP
 * sent later is not held for it (in_prog). */
static __attribute__((noreturn)) void jump(enum real r, struct __jmp_buf_tag env[1], int val)
{
	void (*fn)(struct __jmp_buf_tag *, int) = (void (*)(struct __jmp_buf_tag *, int))real(r);

	in_prog = false;
	if (fn)
		fn(env, val);
	abort();	/* (no longjmp after us: nothing to jump with) */
}

EXPORT __attribute__((noreturn, symver("longjmp@@GLIBC_2.2.5"), symver("_longjmp@@GLIBC_2.2.5"),
		      symver("siglongjmp@@GLIBC_2.2.5")))
void mcr_longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(R_LONGJMP, env, val);
}

EXPORT __attribute__((noreturn, symver("__longjmp_chk@@GLIBC_2.11")))
void mcr_longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump(R_LONGJMP_CHK, env, val);
}
#endif
