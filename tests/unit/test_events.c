// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the short events of <mcloc/control.h>, TAP output: each
 * field at its limits, one past it, and random streams of calls written
 * as the writer chooses (short where it can be, a slot where not) and
 * read back against the state both sides keep.
 */
#include <mcloc/control.h>

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* The short event W that ST's writer made of TIME, PAY (a site, or a
 * duration) and DEPTH, read back against the same state: whether it was
 * short, and (then) in *SAME whether it reads as what was written. */
static int read_back(struct mcloc_ev_state st, uint64_t w, uint64_t time, uint64_t pay,
		     unsigned depth, int *same)
{
	uint64_t t, p;
	unsigned d;

	*same = 0;
	if (!w)
		return 0;
	*same = mcloc_ev_units(w) == 1 && !(w >> 63) && mcloc_ev_short(&st, w, &t, &d, &p) &&
		t == time && p == pay && d == depth;
	return 1;
}

static int entry_round(struct mcloc_ev_state st, uint64_t time, uint64_t site, unsigned depth,
		       int *same)
{
	return read_back(st, mcloc_ev_sentry(&st, time, site, depth), time, site, depth, same);
}

static int exit_round(struct mcloc_ev_state st, uint64_t time, uint64_t dur, unsigned depth,
		      int *same)
{
	return read_back(st, mcloc_ev_sexit(&st, time, dur, depth), time, dur, depth, same);
}

static void limits(void)
{
	const uint64_t T = 1ull << 40, S = 0x555555000000ull;
	struct mcloc_ev_state st = { .time = T, .site = S, .open = 5 };
	int same;

	ok(entry_round(st, T, S, 5, &same) && same, "ENTRY: same time, same site");
	ok(entry_round(st, T + 0xffffffffull, S, 5, &same) && same, "ENTRY: the largest advance");
	ok(!entry_round(st, T + 0x100000000ull, S, 5, &same), "ENTRY: one more is a slot");
	ok(!entry_round(st, T - 1, S, 5, &same), "ENTRY: a time before the last is a slot");
	ok(entry_round(st, T, S + (1 << 26) - 1, 5, &same) && same, "ENTRY: the farthest site after");
	ok(!entry_round(st, T, S + (1 << 26), 5, &same), "ENTRY: one farther is a slot");
	ok(entry_round(st, T, S - (1 << 26), 5, &same) && same, "ENTRY: the farthest site before");
	ok(!entry_round(st, T, S - (1 << 26) - 1, 5, &same), "ENTRY: one farther is a slot");
	ok(!entry_round(st, T, S, 4, &same) && !entry_round(st, T, S, 6, &same),
	   "ENTRY: a depth the state does not imply is a slot");
	ok(exit_round(st, T + (1 << 30) - 1, (1 << 29) - 1, 4, &same) && same,
	   "EXIT: the largest advance and duration");
	ok(!exit_round(st, T + (1 << 30), 1, 4, &same), "EXIT: one more advance is a slot");
	ok(!exit_round(st, T + 1, 1 << 29, 4, &same), "EXIT: one more duration is a slot");
	ok(!exit_round(st, T + 1, 1, 5, &same) && !exit_round(st, T + 1, 1, 3, &same),
	   "EXIT: a depth the state does not imply is a slot");

	struct mcloc_ev_state top = { .time = T, .site = S, .open = MCLOC_EV_DEPTH_MAX - 1 };

	ok(entry_round(top, T, S, MCLOC_EV_DEPTH_MAX - 1, &same) && same,
	   "ENTRY: the deepest short one");
	top.open = MCLOC_EV_DEPTH_MAX;
	ok(!entry_round(top, T, S, MCLOC_EV_DEPTH_MAX, &same),
	   "ENTRY: at the saturated depth, a slot");
	ok(!exit_round(top, T, 1, MCLOC_EV_DEPTH_MAX, &same) &&
	   exit_round(top, T, 1, MCLOC_EV_DEPTH_MAX - 1, &same) && same,
	   "EXIT: short below the saturated depth only");

	struct mcloc_ev_state zero = { 0 };
	uint64_t t, pay;
	unsigned d;

	ok(!mcloc_ev_short(&zero, mcloc_ev_sexit(&st, T + 1, 1, 4), &t, &d, &pay),
	   "a short EXIT read where no call is open is refused");
	ok(mcloc_ev_units(mcloc_ev_word(MCLOC_EV_ENTRY, 3, S)) == 2 &&
	   mcloc_ev_units(mcloc_ev_word(MCLOC_EV_CALL, 0, S)) == 4 &&
	   mcloc_ev_units(mcloc_ev_word(MCLOC_EV_DATA, 0, 15)) == 6 &&
	   mcloc_ev_units(0) == 2, "units of slots, calls, data and what no event starts with");
}

/* A stream of NCALLS calls nested at random, written and read back. */
static void stream(unsigned ncalls)
{
	uint64_t *unit = malloc(ncalls * 8 * sizeof(*unit));
	struct want {
		uint64_t time, pay;
		unsigned type, depth;
	} *want = malloc(ncalls * 2 * sizeof(*want));
	uint64_t open_time[64];
	struct mcloc_ev_state w = { 0 }, r = { 0 };
	uint64_t now = 1ull << 33;
	size_t nu = 0, nw = 0, shorts = 0;
	unsigned depth = 0, calls = 0;

	while (calls < ncalls || depth) {
		/* Mostly small steps; now and then one past what a short
		 * event holds. */
		now += rnd() % 64 ? rnd() % 5000 : rnd() % (1ull << 34);
		bool enter = calls < ncalls && depth < 60 && (!depth || rnd() % 2);
		uint64_t word;
		unsigned type = enter ? MCLOC_EV_ENTRY : MCLOC_EV_EXIT, at;
		uint64_t pay;

		if (enter) {
			at = depth;
			pay = 0x400000 + (rnd() % 16 ? rnd() % 0x100000 : rnd() % (1ull << 40));
			open_time[depth] = now;
			word = mcloc_ev_sentry(&w, now, pay, depth);
			want[nw++] = (struct want){ now, pay, type, depth };
			depth++;
			calls++;
		} else {
			at = --depth;
			pay = now - open_time[depth];
			word = mcloc_ev_sexit(&w, now, pay, depth);
			want[nw++] = (struct want){ now, pay, type, depth };
		}
		if (word) {
			unit[nu++] = word;
			shorts++;
		} else {
			unit[nu++] = mcloc_ev_word(type, at, pay);
			unit[nu++] = now;
		}
		mcloc_ev_advance(&w, type, at, now, pay);
	}
	size_t got = 0, wrong = 0;

	for (size_t i = 0; i < nu; got++) {
		unsigned type = mcloc_ev_type(unit[i]), depth;
		uint64_t time, pay;

		if (type == MCLOC_EV_SENTRY || type == MCLOC_EV_SEXIT) {
			if (!mcloc_ev_short(&r, unit[i], &time, &depth, &pay)) {
				wrong++;
				break;
			}
			type = type == MCLOC_EV_SENTRY ? MCLOC_EV_ENTRY : MCLOC_EV_EXIT;
		} else {
			depth = mcloc_ev_depth(unit[i]);
			pay = mcloc_ev_payload(unit[i]);
			time = unit[i + 1];
		}
		i += mcloc_ev_units(unit[i]);
		mcloc_ev_advance(&r, type, depth, time, pay);
		if (got >= nw || want[got].type != type || want[got].depth != depth ||
		    want[got].time != time || want[got].pay != pay) {
			if (!wrong++ && got < nw)
				printf("# event %zu: type %u/%u depth %u/%u time %llx/%llx pay %llx/%llx\n",
				       got, type, want[got].type, depth, want[got].depth,
				       (unsigned long long)time, (unsigned long long)want[got].time,
				       (unsigned long long)pay, (unsigned long long)want[got].pay);
		}
	}
	char what[128];

	snprintf(what, sizeof(what), "%u random calls: %zu events read back as written (%zu short)",
		 ncalls, nw, shorts);
	if (wrong || got != nw)
		printf("# %zu wrong, %zu read\n", wrong, got);
	ok(!wrong && got == nw && shorts > nw / 3 && shorts < nw, what);
	free(unit);
	free(want);
}

int main(void)
{
	limits();
	stream(1000);
	stream(200000);
	return tap_done();
}
