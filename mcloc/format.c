// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The text, JSON, Chrome and profile output of a stream of events, shared
 * by the live trace (trace.c, from the rings) and the offline tools
 * (replay.c, from a recording): one formatter, whichever way the events
 * came.  Events arrive merged by time, as struct item.
 */
#include "format.h"
#include "symbols.h"
#include "../base/grow.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- decoding --------------------------------------------------------------- */

size_t decode_event(struct decoder *d, const uint64_t *v, size_t n, struct event *e)
{
	if (!n)
		return 0;
	uint64_t w = v[0];
	unsigned type = mcloc_ev_type(w), base = type & 0xf, depth = mcloc_ev_depth(w);
	uint64_t pay = mcloc_ev_payload(w), time;
	size_t units = mcloc_ev_units(w);

	if (units > n)
		return 0;
	if (base == MCLOC_EV_SENTRY || base == MCLOC_EV_SEXIT) {
		if (!mcloc_ev_short(&d->st, w, &time, &depth, &pay)) {
			e->type = 0;	/* (no state it could be read against) */
			return 1;
		}
		base = type = base == MCLOC_EV_SENTRY ? MCLOC_EV_ENTRY : MCLOC_EV_EXIT;
	} else {
		time = v[1];
	}
	/* The event's DATA, written with it: whole once the event is.  (Told
	 * before any state changes: a caller given 0 decodes it again.) */
	size_t du = 0;

	if ((base == MCLOC_EV_CALL || base == MCLOC_EV_ENTRY || base == MCLOC_EV_EXIT ||
	     base == MCLOC_EV_UNTIMED) &&
	    units < n && (mcloc_ev_type(v[units]) & 0xf) == MCLOC_EV_DATA) {
		du = mcloc_ev_units(v[units]);
		if (units + du > n)
			return 0;
	}
	if (base >= MCLOC_EV_CALL && base <= MCLOC_EV_DATA)
		mcloc_ev_advance(&d->st, base, depth, time, pay);
	*e = (struct event){ .time = time, .ip = pay, .depth = (uint16_t)depth, .cpu = d->cpu };
	if (d->lost)
		type |= MCLOC_EV_LOST_BEFORE;
	d->lost = false;
	switch (base) {
	case MCLOC_EV_CPU:
		d->cpu = (uint32_t)pay;
		d->lost = type & MCLOC_EV_LOST_BEFORE;
		return units;	/* (type 0: nothing to show) */
	case MCLOC_EV_CALL:
		e->cpu = (uint32_t)v[2];
		e->parent = v[3];
		break;
	case MCLOC_EV_ENTRY:
		/* (Grown to the depth entries reach, not the most an event
		 * can say: a recording may hold many thousand threads.) */
		if (depth >= d->nsite) {
			uint32_t n = d->nsite ? 2 * d->nsite : 32;

			n = n > depth ? n : depth + 1;
			n = n < MCLOC_EV_DEPTH_MAX + 1 ? n : MCLOC_EV_DEPTH_MAX + 1;
			uint64_t *v = realloc(d->site_at, n * sizeof(*v));

			if (v) {
				memset(v + d->nsite, 0, (n - d->nsite) * sizeof(*v));
				d->site_at = v;
				d->nsite = n;
			}
		}
		if (depth < d->nsite) {
			d->site_at[depth] = pay;
			e->caller_site = depth ? d->site_at[depth - 1] : 0;
		}
		break;
	case MCLOC_EV_EXIT:
	case MCLOC_EV_LEFT:
		if (base == MCLOC_EV_EXIT) {
			e->parent = pay;
			e->ip = depth < d->nsite ? d->site_at[depth] : 0;
		}
		/* The call at this depth is over: a later exit there, whose
		 * entry came before the trace or a gap, is not named by it. */
		if (depth < d->nsite)
			d->site_at[depth] = 0;
		break;
	case MCLOC_EV_UNTIMED:
	case MCLOC_EV_MARK:	/* (ip: the mark's kind) */
		break;
	case MCLOC_EV_DATA:
		/* (Alone: the reader started inside its event.) */
		e->type = type & MCLOC_EV_LOST_BEFORE;
		return units;
	default:
		/* A CALL's second slot, or what no event of this version
		 * starts with: skipped.  (Alone with LOST_BEFORE: lost at the
		 * thread's end.) */
		e->type = type & MCLOC_EV_LOST_BEFORE;
		return units;
	}
	e->type = (uint16_t)type;
	if (du) {
		uint64_t bytes = mcloc_ev_payload(v[units]);

		if (!d->data)
			d->data = malloc(2 * MCLOC_EV_DATA_MAX);
		if (bytes <= MCLOC_EV_DATA_MAX && d->data) {
			uint8_t *out = d->data + (d->turn ^= 1) * MCLOC_EV_DATA_MAX;

			for (size_t k = 2, at = 0; k < du; k += 2, at += MCLOC_EV_DATA_SLOT)
				mcloc_ev_data_unpack(v + units + k, out + at, bytes - at);
			e->data = out;
			e->ndata = (uint32_t)bytes;
		}
		units += du;
	}
	return units;
}

void decoder_free(struct decoder *d)
{
	free(d->site_at);
	free(d->data);
	d->site_at = NULL;
	d->data = NULL;
	d->nsite = 0;
}

/* ---- the rings ------------------------------------------------------------- */

struct mcloc_ring *ring_at(const struct tracing *t, uint32_t i)
{
	return (struct mcloc_ring *)((uint8_t *)t->h + t->g.data_offset +
				     (size_t)i * t->g.ring_stride);
}

uint32_t rings_taken(const struct tracing *t)
{
	uint32_t n = __atomic_load_n(&t->h->next_ring, __ATOMIC_ACQUIRE);

	/* (Rings are taken in order; a peer's count is data, bounded.) */
	if (n > t->g.rings)
		n = t->g.rings;
	while (n < t->g.rings && __atomic_load_n(&ring_at(t, n)->tid, __ATOMIC_ACQUIRE))
		n++;
	return n;
}

bool ring_unread(struct tracing *t, uint32_t i, bool copy, struct unread *u)
{
	struct mcloc_ring *r = ring_at(t, i);
	uint32_t size = t->g.ring_size;
	bool overwrite = t->g.flags & MCLOC_RING_OVERWRITE;
	/* (Whole units only: the tail stays a multiple of one, so every copy
	 * lies inside the ring.) */
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) &
			~(uint64_t)(MCLOC_EV_UNIT - 1);
	uint64_t tail = t->tails[i];

	*u = (struct unread){ .tid = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE), .head = head };
	/* (A head behind what was read is no program's: nothing to read
	 * until it passes it, rather than a wrapped count of events lost.) */
	if (!u->tid || head <= tail)
		return false;
	/* Overwrite: from the oldest slot still there.  (Without it, a head
	 * that far ahead is no program's: skipped all the same, so that a
	 * pass reads a ringful at most.) */
	if (head - tail > size) {
		u->gap = head - size - tail;
		tail = head - size;
		if (!overwrite) {
			t->skipped += u->gap / MCLOC_EV_UNIT;	/* (at most) */
			u->gap = 0;
		}
	}
	const uint8_t *data = (const uint8_t *)(r + 1);
	uint64_t n = head - tail, at = tail & (size - 1);

	u->na = n < size - at ? n : size - at;
	u->nb = n - u->na;
	u->a = data + at;
	u->b = data;
	if (!copy && !overwrite)
		return true;
	if (t->cap_raw < n) {
		void *raw = realloc(t->raw, n);

		if (!raw)
			return false;	/* (read at the next pass) */
		t->raw = raw;
		t->cap_raw = n;
	}
	/* Copied out first: in overwrite mode the writer may go over them
	 * meanwhile, as claim tells after the copy.  The first slot kept
	 * then says events were lost before it. */
	uint8_t *v = (uint8_t *)t->raw;

	memcpy(v, u->a, u->na);
	memcpy(v + u->na, u->b, u->nb);
	uint64_t torn = 0;

	if (overwrite) {
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint64_t claim = __atomic_load_n(&r->claim, __ATOMIC_RELAXED);

		torn = claim > size + tail ? claim - size - tail : 0;
		torn = torn < n ? torn : n;
		u->gap += torn;
		/* (In events: the function tracer's take two slots each, the
		 * graph's one, but for a CPU slot; an overwriting ring has no
		 * short events.) */
		if (u->gap)
			t->overwritten += u->gap / (sizeof(struct mcloc_event) *
						    (t->mode == FUNCTION ? 2 : 1));
	}
	u->a = v + torn;
	u->na = n - torn;
	u->nb = 0;
	if (u->gap && u->na)
		((struct mcloc_event *)(v + torn))->word |= mcloc_ev_word(MCLOC_EV_LOST_BEFORE, 0, 0);
	return true;
}

void ring_consume(struct tracing *t, uint32_t i, uint64_t head)
{
	t->tails[i] = head;
	__atomic_store_n(&ring_at(t, i)->tail, head, __ATOMIC_RELEASE);
}

/* ---- names ---------------------------------------------------------------- */

struct name *name_add(struct names *ns, uint64_t addr)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 256;
		struct name *v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		ns->v = v;
		ns->cap = cap;
	}
	ns->sorted = false;
	ns->v[ns->n] = (struct name){ .addr = addr };
	return &ns->v[ns->n++];
}

static int cmp_name(const void *a, const void *b)
{
	const struct name *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

size_t name_index(const struct name *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct name *name_find(struct names *ns, uint64_t addr)
{
	size_t h = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 54) & (NAME_CACHE - 1);

	if (!ns->sorted) {
		if (ns->n)
			qsort(ns->v, ns->n, sizeof(*ns->v), cmp_name);
		ns->sorted = true;
		memset(ns->cache, 0, sizeof(ns->cache));
	} else if (ns->cache[h] && ns->cache[h] <= ns->n && ns->v[ns->cache[h] - 1].addr == addr) {
		return &ns->v[ns->cache[h] - 1];
	}
	size_t lo = name_index(ns->v, ns->n, addr);

	if (lo < ns->n && ns->v[lo].addr == addr) {
		if (lo < UINT32_MAX)
			ns->cache[h] = (uint32_t)lo + 1;
		return &ns->v[lo];
	}
	return NULL;
}

void names_merge(struct names *into, struct names *from)
{
	name_find(into, 0);	/* (sorted: those known are searched, the new appended) */
	size_t known = into->n;

	/* (Each name moves over, or is freed where INTO has its address.) */
	for (size_t i = 0; i < from->n; i++) {
		size_t lo = name_index(into->v, known, from->v[i].addr);
		struct name *have = lo < known && into->v[lo].addr == from->v[i].addr ?
					    &into->v[lo] : NULL;

		if (have && have->name) {
			free(from->v[i].name);
		} else if (have) {
			have->name = from->v[i].name;
		} else {
			struct name *n = name_add(into, from->v[i].addr);

			if (n)
				*n = from->v[i];
			else
				free(from->v[i].name);
		}
		from->v[i].name = NULL;
	}
}

/* ADDR's name in NS, or ADDR in hex in BUF. */
static const char *name_or_addr(struct names *ns, uint64_t addr, char *buf, size_t len)
{
	struct name *n = name_find(ns, addr);

	if (n && n->name)
		return n->name;
	snprintf(buf, len, "%#llx", (unsigned long long)addr);
	return buf;
}

const char *site_name(struct tracing *t, uint64_t ip, char *buf, size_t len)
{
	if (!ip)
		return "?";	/* (an exit whose entry came before the trace) */
	struct name *n = name_find(&t->sites, ip);
	const char *s = n && n->name ? n->name : t->symbolize ? t->symbolize(t, ip, buf, len) : NULL;

	return s ? s : name_or_addr(&t->sites, ip, buf, len);
}

const char *caller_name(struct tracing *t, uint64_t addr, char *buf, size_t len)
{
	/* A return address is named by the byte before it, in the call:
	 * the call of a function that never returns may be its caller's
	 * last instruction, and ADDR then lies in the function after it. */
	struct name *n = name_find(&t->callers, addr);
	const char *s = n && n->name ? n->name :
			t->symbolize && addr ? t->symbolize(t, addr - 1, buf, len) : NULL;

	return s ? s : name_or_addr(&t->callers, addr, buf, len);
}

/* ---- events in time order ------------------------------------------------ */

int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->e.time != y->e.time)
		return x->e.time < y->e.time ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Whether V needs no sort: one thread's events come in order. */
bool in_order(const struct item *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (cmp_item(&v[i - 1], &v[i]) > 0)
			return false;
	return true;
}
/* V as a count of nanoseconds: saturated, as a double out of range has
 * no integer value. */
uint64_t saturate(double v)
{
	return !(v > 0) ? 0 : v >= 0x1p64 ? UINT64_MAX : (uint64_t)v;
}

uint64_t scaled(const struct tracing *t, uint64_t units)
{
	return saturate((double)units * t->rate);
}

uint64_t to_ns(const struct tracing *t, uint64_t time)
{
	if (!t->g.ticks)
		return time;
	double d = (double)(int64_t)(time - t->g.start_time) * t->rate;

	return d < 0 ? t->g.start_ns - saturate(-d) : t->g.start_ns + saturate(d);
}

struct thread *thread_of(struct tracing *t, uint32_t tid, const char *comm)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	struct thread *v = mc_grown(t->threads, &t->cap_threads, t->nthreads, sizeof(*v), 4);

	if (!v)
		return NULL;
	t->threads = v;
	struct thread *th = &v[t->nthreads++];

	memset(th, 0, sizeof(*th));
	th->tid = tid;
	if (comm)
		memcpy(th->comm, comm, sizeof(th->comm) - 1);
	return th;
}

/* ---- formatting ------------------------------------------------------------- */

/* The text formats' lines, put together by hand on F: a replay prints
 * millions of them, and printf's parsing of its format was most of the
 * time it took. */
static void out_str(FILE *f, const char *s)
{
	fputs_unlocked(s, f);
}

static void out_spaces(FILE *f, size_t n)
{
	static const char sp[] = "                                                                ";

	for (size_t k; n; n -= k) {
		k = n < sizeof(sp) - 1 ? n : sizeof(sp) - 1;
		fwrite_unlocked(sp, 1, k, f);
	}
}

/* V in decimal, right-aligned in WIDTH columns filled with FILL. */
static void out_uint(FILE *f, uint64_t v, size_t width, char fill)
{
	char d[24];
	size_t n = 0;

	do
		d[sizeof(d) - ++n] = (char)('0' + v % 10);
	while ((v /= 10));
	for (; n < width; width--)
		putc_unlocked(fill, f);
	fwrite_unlocked(d + sizeof(d) - n, 1, n, f);
}

/* V in decimal, left-aligned in WIDTH columns. */
static void out_uint_left(FILE *f, uint64_t v, size_t width)
{
	char d[24];
	size_t n = 0;

	do
		d[sizeof(d) - ++n] = (char)('0' + v % 10);
	while ((v /= 10));
	fwrite_unlocked(d + sizeof(d) - n, 1, n, f);
	if (n < width)
		out_spaces(f, width - n);
}

static void print_time(uint64_t ns)
{
	out_uint(stdout, ns / 1000000000u, 5, ' ');
	putc_unlocked('.', stdout);
	out_uint(stdout, ns / 1000 % 1000000, 6, '0');
}

/* ftrace's duration column: a mark for long calls, then microseconds. */
static void print_duration(uint64_t ns)
{
	char mark = ns > 1000000000 ? '$' : ns > 100000000 ? '@' : ns > 10000000 ? '*' :
		    ns > 1000000 ? '#' : ns > 100000 ? '!' : ns > 10000 ? '+' : ' ';

	putc_unlocked(mark, stdout);
	putc_unlocked(' ', stdout);
	out_uint(stdout, ns / 1000, 7, ' ');
	putc_unlocked('.', stdout);
	out_uint(stdout, ns % 1000, 3, '0');
	out_str(stdout, " us |");
}

/* --srcline: the file and line of the site IP, where known, as a comment. */
static void put_source(struct tracing *t, uint64_t ip)
{
	char b[4096];
	const char *src = t->source ? t->source(t, ip, b, sizeof(b)) : NULL;

	if (src) {
		out_str(stdout, " /* ");
		out_str(stdout, src);
		out_str(stdout, " */");
	}
}

/* ---- arguments and return values ---- */

size_t next_arg_item(const uint8_t *d, size_t n, struct arg_item *it)
{
	if (n < 2 || (size_t)d[1] + 2 > n)
		return 0;
	*it = (struct arg_item){ .fmt = d[0] & MCLOC_DATA_FMT,
				 .flags = d[0] & (unsigned)~MCLOC_DATA_FMT, .v = d + 2,
				 .len = d[1] };
	return 2 + (size_t)d[1];
}

/* The string of IT quoted, as C (text) or JSON escapes it; any byte that
 * is not printable ASCII escaped, but for JSON's valid UTF-8, which stays:
 * \u00XX there means the code point, and would turn "\xc3\xb6" into two
 * characters that are not the program's. */
static void put_quoted(FILE *f, const struct arg_item *it, bool json)
{
	bool hexed = false;	/* the last byte went as \xXX */

	putc_unlocked('"', f);
	for (unsigned k = 0; k < it->len; k++) {
		unsigned c = it->v[k];
		size_t u = json && c >= 0x80 ? sym_utf8_len(it->v + k, it->len - k) : 0;
		bool was_hexed = hexed;

		hexed = false;
		if (u) {
			fwrite(it->v + k, 1, u, f);
			k += (unsigned)u - 1;
		} else if (c == '"' || c == '\\') {
			putc_unlocked('\\', f);
			putc_unlocked((int)c, f);
		} else if (c == '\n') {
			out_str(f, "\\n");
		} else if (c == '\t') {
			out_str(f, "\\t");
		} else if (c < 0x20 || c >= 0x7f ||
			   /* (C's \x takes every hex digit after it: one
			    * right after another escape is escaped too.) */
			   (!json && was_hexed && isxdigit((int)c))) {
			fprintf(f, json ? "\\u%04x" : "\\x%02x", c);
			hexed = !json;
		} else if (!json && c == '/' && k && it->v[k - 1] == '*') {
			/* (A return value is shown in a comment, which a
			 * string's own star-slash would end early.) */
			out_str(f, "\\x2f");
			hexed = true;
		} else {
			putc_unlocked((int)c, f);
		}
	}
	putc_unlocked('"', f);
	if (it->flags & MCLOC_DATA_CUT)
		out_str(f, json ? "" : "...");
}

void arg_value_of(const struct arg_item *it, struct arg_value *v)
{
	uint64_t raw = 0;

	*v = (struct arg_value){ .kind = VAL_NONE, .s = it->v, .len = it->len };
	if ((it->flags & MCLOC_DATA_BAD) && (it->fmt != MCLOC_ARG_STR || it->len != 8))
		return;
	if (it->fmt == MCLOC_ARG_STR) {
		if (it->flags & MCLOC_DATA_NULL) {
			v->kind = VAL_NULLPTR;
		} else if (it->flags & MCLOC_DATA_BAD) {
			memcpy(&v->u, it->v, 8);
			v->kind = VAL_HEX;
		} else {
			v->kind = VAL_STR;
			v->cut = it->flags & MCLOC_DATA_CUT;
		}
		return;
	}
	if (!it->len)
		return;		/* (no bytes: a forged item, shown unreadable) */
	memcpy(&raw, it->v, it->len < 8 ? it->len : 8);
	unsigned bits = 8 * (it->len < 8 ? it->len : 8);
	uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;

	raw &= mask;
	v->u = raw;
	switch (it->fmt) {
	case MCLOC_ARG_INT:
		v->kind = VAL_INT;
		v->i = bits == 64 || !(raw >> (bits - 1) & 1) ? (int64_t)raw : (int64_t)(raw | ~mask);
		break;
	case MCLOC_ARG_UINT:
		v->kind = VAL_UINT;
		break;
	case MCLOC_ARG_AUTO: {
		/* A small number in decimal (an int's negative value in a
		 * register whose upper half the callee zeroed too), anything
		 * else, a pointer mostly, in hex. */
		int64_t i = (int64_t)raw;
		int32_t low = (int32_t)(uint32_t)raw;

		if (bits == 64 && (i < -100000 || i > 100000) && !(raw >> 32) && low < 0 &&
		    low >= -100000)
			i = low;
		v->kind = i >= -100000 && i <= 100000 ? VAL_INT : VAL_HEX;
		v->i = i;
		break;
	}
	case MCLOC_ARG_CHAR:
		v->kind = VAL_CHAR;
		break;
	case MCLOC_ARG_FLOAT:
		v->kind = VAL_DOUBLE;
		v->single = it->len == 4;
		if (v->single) {
			float x;
			uint32_t w = (uint32_t)raw;

			memcpy(&x, &w, 4);
			v->d = x;
		} else {
			memcpy(&v->d, &raw, 8);
		}
		break;
	default:	/* HEX, and a format of a later version */
		v->kind = VAL_HEX;
		break;
	}
}

/* The value of IT on F. */
static void put_value(FILE *f, const struct arg_item *it, bool json)
{
	struct arg_value v;

	arg_value_of(it, &v);
	switch (v.kind) {
	case VAL_NONE:
		out_str(f, json ? "null" : "?");
		break;
	case VAL_NULLPTR:
		out_str(f, json ? "null" : "NULL");
		break;
	case VAL_STR:
		put_quoted(f, it, json);
		break;
	case VAL_INT:
		fprintf(f, "%lld", (long long)v.i);
		break;
	case VAL_UINT:
		fprintf(f, "%llu", (unsigned long long)v.u);
		break;
	case VAL_HEX:
		fprintf(f, json ? "\"%#llx\"" : "%#llx", (unsigned long long)v.u);
		break;
	case VAL_CHAR: {
		uint8_t b = (uint8_t)v.u;
		struct arg_item c = { .v = &b, .len = 1 };

		if (json)
			put_quoted(f, &c, true);
		else if (b >= 0x20 && b < 0x7f && b != '\'' && b != '\\')
			fprintf(f, "'%c'", (int)b);
		else
			fprintf(f, "'\\x%02x'", (unsigned)b);
		break;
	}
	case VAL_DOUBLE:
		/* (JSON has no NaN or infinity: those go as strings.) */
		if (json && !isfinite(v.d))
			fprintf(f, "\"%g\"", v.d);
		else
			fprintf(f, "%.*g", v.single ? 9 : 17, v.d);
		break;
	}
}

void put_arg_items(FILE *f, const uint8_t *d, size_t n, bool json, bool ret)
{
	struct arg_item it;
	bool first = true;

	for (size_t used; (used = next_arg_item(d, n, &it)); d += used, n -= used) {
		if (!(it.flags & MCLOC_DATA_RET) != !ret)
			continue;
		if (!first)
			out_str(f, json ? "," : ", ");
		first = false;
		put_value(f, &it, json);
		/* (A call has one: a DATA event that says more is forged,
		 * and JSON's retval takes one value.) */
		if (ret)
			break;
	}
}

/* JSON: after the arguments (RET: the return value) of the N bytes at
 * D, which of them were strings cut to what was kept: ,"cut":[indices]
 * (,"retval_cut":true), or nothing when none was.  (Apart from the
 * values, which stay the bytes read: a value's own "..." is no mark.) */
static void put_cut(FILE *f, const uint8_t *d, size_t n, bool ret)
{
	struct arg_item it;
	unsigned i = 0, cut = 0;

	for (size_t used; (used = next_arg_item(d, n, &it)); d += used, n -= used) {
		if (!(it.flags & MCLOC_DATA_RET) != !ret)
			continue;
		struct arg_value v;

		arg_value_of(&it, &v);	/* (what a cut string is: one place) */
		if (v.cut) {
			if (ret) {
				out_str(f, ",\"retval_cut\":true");
				return;
			}
			fprintf(f, cut++ ? ",%u" : ",\"cut\":[%u", i);
		}
		if (ret)
			return;
		i++;
	}
	if (cut)
		putc_unlocked(']', f);
}

/* Whether the N bytes at D hold a return value. */
static bool has_ret(const uint8_t *d, size_t n)
{
	struct arg_item it;

	for (size_t used; (used = next_arg_item(d, n, &it)); d += used, n -= used)
		if (it.flags & MCLOC_DATA_RET)
			return true;
	return false;
}

/* A call's arguments after its name: "(1, 2)", or "()" without. */
static void put_call_args(const uint8_t *d, size_t n)
{
	putc_unlocked('(', stdout);
	put_arg_items(stdout, d, n, false, false);
	putc_unlocked(')', stdout);
}

/* A graph line's call: "|  ", the depth's indent, then TEXT (NULL: none). */
static void graph_indent(unsigned depth, const char *text)
{
	out_spaces(stdout, 2 * (size_t)depth);
	if (text)
		out_str(stdout, text);
}

static void graph_prefix(struct tracing *t, const struct thread *th, const struct event *e)
{
	if (t->last_tid && t->last_tid != th->tid)
		printf(" ------------------------------------------\n"
		       " %3u) %s-%u => %s-%u\n"
		       " ------------------------------------------\n\n", e->cpu,
		       thread_of(t, t->last_tid, NULL)->comm, t->last_tid, th->comm, th->tid);
	t->last_tid = th->tid;
	putc_unlocked(' ', stdout);
	out_uint(stdout, e->cpu, 3, ' ');
	out_str(stdout, ") ");
}

static void json_event(struct tracing *t, const struct thread *th, const struct event *e,
		       const char *type, uint64_t dur)
{
	char b1[32], b2[32];

	printf("{\"time_ns\":%llu,\"pid\":%u,\"tid\":%u,\"cpu\":%u,", (unsigned long long)to_ns(t, e->time),
	       t->pid, th->tid, e->cpu);
	json_str("type", type, false);
	json_str("function", site_name(t, e->ip, b1, sizeof(b1)), false);
	if (e->type == MCLOC_EV_CALL && !e->caller_site)
		json_str("parent", caller_name(t, e->parent, b2, sizeof(b2)), false);
	else if (e->caller_site)
		json_str("parent", site_name(t, e->caller_site, b2, sizeof(b2)), false);
	if (e->type == MCLOC_EV_EXIT)
		printf("\"duration_ns\":%llu,", (unsigned long long)dur);
	if (e->ndata && e->type == MCLOC_EV_EXIT) {
		if (has_ret(e->data, e->ndata)) {
			out_str(stdout, "\"retval\":");
			put_arg_items(stdout, e->data, e->ndata, true, true);
			put_cut(stdout, e->data, e->ndata, true);
			putc_unlocked(',', stdout);
		}
	} else if (e->ndata) {
		out_str(stdout, "\"args\":[");
		put_arg_items(stdout, e->data, e->ndata, true, false);
		putc_unlocked(']', stdout);
		put_cut(stdout, e->data, e->ndata, false);
		putc_unlocked(',', stdout);
	}
	printf("\"depth\":%u}\n", e->depth);
}

/* A metadata event KIND (process_name, thread_name) naming TH's process
 * or thread by TH's command name. */
static void chrome_name(struct tracing *t, const struct thread *th, const char *kind)
{
	FILE *f = t->chrome;

	fprintf(f, "%s{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"",
		t->chrome_first ? "\n" : ",\n", kind, t->pid, th->tid);
	for (const char *s = th->comm; *s && s < th->comm + sizeof(th->comm); s++) {
		if (*s == '"' || *s == '\\')
			putc_unlocked('\\', f);
		putc_unlocked((unsigned char)*s < 0x20 ? '?' : *s, f);
	}
	out_str(f, "\"}}");
	t->chrome_first = false;
}

void chrome_event(struct tracing *t, const struct thread *th, const char *ph,
			 const char *name, uint64_t ns, const struct event *e)
{
	if (!t->chrome)
		return;
	FILE *f = t->chrome;

	out_str(f, t->chrome_first ? "\n{\"name\":\"" : ",\n{\"name\":\"");
	for (const char *s = name; *s; s++) {
		if (*s == '"' || *s == '\\')
			putc_unlocked('\\', f);
		putc_unlocked(*s, f);
	}
	out_str(f, "\",\"ph\":\"");
	out_str(f, ph);
	out_str(f, "\",\"ts\":");
	out_uint(f, ns / 1000, 0, ' ');
	putc_unlocked('.', f);
	out_uint(f, ns % 1000, 3, '0');
	out_str(f, ",\"pid\":");
	out_uint(f, t->pid, 0, ' ');
	out_str(f, ",\"tid\":");
	out_uint(f, th->tid, 0, ' ');
	/* (Arguments with a call's beginning, the return value with its
	 * end, as the viewers show an event's args.) */
	if (e && e->ndata) {
		bool ret = e->type == MCLOC_EV_EXIT;

		if (!ret || has_ret(e->data, e->ndata)) {
			out_str(f, ret ? ",\"args\":{\"retval\":" : ",\"args\":{\"args\":[");
			put_arg_items(f, e->data, e->ndata, true, ret);
			if (!ret)
				putc_unlocked(']', f);
			put_cut(f, e->data, e->ndata, ret);
			putc_unlocked('}', f);
		}
	}
	putc_unlocked('}', f);
	t->chrome_first = false;
}

/* The innermost of TH's open braces is closed (its bit in open_at). */
static void close_at(struct thread *th)
{
	for (unsigned w = STACK / 64; w-- > 0;)
		if (th->open_at[w]) {
			th->open_at[w] &= ~(1ull << (63 - __builtin_clzll(th->open_at[w])));
			return;
		}
}

/* Print TH's pending graph entry as an opening line. */
void graph_flush_pending(struct tracing *t, struct thread *th)
{
	char b[32];

	if (!th->pending)
		return;
	th->pending = false;
	/* (--chrome: the file instead of the text.  A threshold prints a
	 * call at its end only, as ftrace's tracing_thresh does, once its
	 * time is known: a brace is never left open.) */
	if (t->json || t->chrome || t->mode != GRAPH || t->threshold_ns)
		return;
	graph_prefix(t, th, &th->entry);
	out_spaces(stdout, 16);
	out_str(stdout, "|  ");
	graph_indent(th->entry.depth, site_name(t, th->entry.ip, b, sizeof(b)));
	put_call_args(th->entry_data, th->entry.ndata);
	out_str(stdout, " {");
	put_source(t, th->entry.ip);
	putc_unlocked('\n', stdout);
	if (th->entry.depth < STACK)
		th->open_at[th->entry.depth / 64] |= 1ull << (th->entry.depth % 64);
	th->opened++;
}

static size_t hit_hash(uint64_t ip, uint32_t tid, size_t mask)
{
	return (size_t)(((ip ^ (uint64_t)tid << 40) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* The counters of the function at IP (of thread TID with --per-thread):
 * found through a hash of them, as a profile sees an event per call. */
static struct hit *hit_of(struct tracing *t, uint64_t ip, uint32_t tid)
{
	if (!t->per_thread)
		tid = 0;
	for (size_t i = t->hit_index ? hit_hash(ip, tid, t->index_mask) : 0;
	     t->hit_index && t->hit_index[i]; i = (i + 1) & t->index_mask) {
		struct hit *h = &t->hits[t->hit_index[i] - 1];

		if (h->ip == ip && h->tid == tid)
			return h;
	}
	if (t->nhits == t->cap_hits) {
		size_t cap = t->cap_hits ? 2 * t->cap_hits : 256;
		struct hit *v = realloc(t->hits, cap * sizeof(*v));
		size_t *ix = calloc(2 * cap, sizeof(*ix));

		if (!v || !ix) {
			free(ix);
			if (v)
				t->hits = v;
			return NULL;
		}
		t->hits = v;
		t->cap_hits = cap;
		free(t->hit_index);
		t->hit_index = ix;
		t->index_mask = 2 * cap - 1;
		for (size_t k = 0; k < t->nhits; k++) {
			size_t i = hit_hash(t->hits[k].ip, t->hits[k].tid, t->index_mask);

			while (ix[i])
				i = (i + 1) & t->index_mask;
			ix[i] = k + 1;
		}
	}
	size_t i = hit_hash(ip, tid, t->index_mask);

	while (t->hit_index[i])
		i = (i + 1) & t->index_mask;
	t->hits[t->nhits] = (struct hit){ .ip = ip, .tid = tid };
	t->hit_index[i] = ++t->nhits;
	return &t->hits[t->nhits - 1];
}

/* The call of H on top of TH's stack (just taken off it) took DUR. */
static void profile_end(struct thread *th, struct hit *h, uint64_t dur)
{
	bool inner = false;

	/* A recursive function's total is that of its outermost calls (as
	 * graph FUNC and uftrace report count it), else each level's time
	 * would be added again: its calls inside itself add their count and
	 * self time only. */
	for (unsigned k = 0; k < th->depth && !inner; k++)
		inner = th->stack[k].ip == h->ip;
	if (!inner)
		h->total_ns += dur;
	h->self_ns += dur > th->stack[th->depth].child_ns ? dur - th->stack[th->depth].child_ns : 0;
	if (th->depth && th->depth - 1 < STACK)
		th->stack[th->depth - 1].child_ns += dur;
}

static void profile_event(struct tracing *t, struct thread *th, const struct event *e,
			  uint64_t ns)
{
	/* (An exit whose entry was lost names no site: nothing to count.) */
	struct hit *h = e->ip ? hit_of(t, e->ip, th->tid) : NULL;

	if (!h)
		return;
	if (e->type == MCLOC_EV_ENTRY) {
		h->calls++;
		if (th->depth < STACK)
			th->stack[th->depth] = (struct open_call){ e->ip, 0, ns };
		th->depth++;
	} else if (e->type == MCLOC_EV_UNTIMED) {
		h->calls++;
		h->untimed++;
	} else if (th->depth && (e->type == MCLOC_EV_EXIT || e->type == MCLOC_EV_LEFT)) {
		th->depth--;
		if (e->type == MCLOC_EV_LEFT || th->depth >= STACK)
			h->untimed++;
		else
			profile_end(th, h, scaled(t, e->parent));
	}
}

/* Events of TH were lost before its next one (at NS): say so where the
 * gap is, as trace_pipe does, and forget the calls it was inside, whose
 * ends may be among them. */
void thread_lost(struct tracing *t, struct thread *th, const struct event *e)
{
	graph_flush_pending(t, th);
	while (th->open) {
		chrome_event(t, th, "E", "", th->last_ns, NULL);
		th->open--;
	}
	th->opened = 0;
	memset(th->open_at, 0, sizeof(th->open_at));
	memset(th->live, 0, sizeof(th->live));
	th->depth = 0;
	if (t->json)
		printf("{\"pid\":%u,\"tid\":%u,\"type\":\"lost\"}\n", t->pid, th->tid);
	else if (t->mode == GRAPH && !t->chrome)
		printf(" %3u) %s-%u [LOST EVENTS]\n", e->cpu, th->comm, th->tid);
	else if (t->mode == FUNCTION && !t->chrome)
		printf("%16s-%-7u [%03u] [LOST EVENTS]\n", th->comm, th->tid, e->cpu);
}

/* A trigger's mark: a backtrace (the calls the thread is inside, the
 * innermost first), or where a snapshot was asked. */
static void mark_event(struct tracing *t, struct thread *th, const struct event *e, uint64_t ns)
{
	char b[32];
	bool bt = e->ip == MCLOC_MARK_BACKTRACE;

	if (t->chrome || t->mode == PROFILE)
		return;
	graph_flush_pending(t, th);
	if (t->json) {
		printf("{\"time_ns\":%llu,\"pid\":%u,\"tid\":%u,\"type\":\"%s\"",
		       (unsigned long long)ns, t->pid, th->tid, bt ? "backtrace" : "snapshot");
		if (bt && t->mode == GRAPH) {
			printf(",\"stack\":[");
			for (unsigned d = e->depth + 1; d-- > 0;)
				if (d < STACK)
					printf("\"%s\"%s", site_name(t, th->stack[d].ip, b, sizeof(b)),
					       d ? "," : "");
			putchar(']');
		}
		printf("}\n");
		return;
	}
	if (t->mode == GRAPH) {
		graph_prefix(t, th, e);
		out_spaces(stdout, 16);
		out_str(stdout, "|  ");
		graph_indent(e->depth + 1, bt ? "/* backtrace: " : "/* snapshot */\n");
		for (unsigned d = e->depth + 1; bt && d-- > 0;) {
			if (d < STACK)
				out_str(stdout, site_name(t, th->stack[d].ip, b, sizeof(b)));
			out_str(stdout, d ? " <- " : " */\n");
		}
		return;
	}
	/* (The function tracer keeps no stack: the call and its caller.) */
	printf("%16s-%-7u [%03u] ", th->comm, th->tid, e->cpu);
	print_time(ns);
	printf(": <%s>\n", bt ? "backtrace: the function tracer keeps no stack (record "
				"function_graph)" : "snapshot");
}

void format_event(struct tracing *t, struct item *it)
{
	struct event *e = &it->e;
	struct thread *th = thread_of(t, it->tid, NULL);
	uint64_t ns = to_ns(t, e->time);
	char b1[32], b2[32];

	if (!th)
		return;
	if (e->type & MCLOC_EV_LOST_BEFORE) {
		e->type &= (uint16_t)~MCLOC_EV_LOST_BEFORE;
		thread_lost(t, th, e);
	}
	t->events++;
	th->last_ns = ns;
	th->cpu = e->cpu;
	if (e->type == MCLOC_EV_MARK) {
		mark_event(t, th, e, ns);
		return;
	}
	if (t->mode == PROFILE) {
		profile_event(t, th, e, ns);
		return;
	}
	if (e->type == MCLOC_EV_ENTRY && e->depth < STACK) {
		th->stack[e->depth] = (struct open_call){ e->ip, 0, ns };
		th->live[e->depth / 64] |= 1ull << (e->depth % 64);
	} else if ((e->type == MCLOC_EV_EXIT || e->type == MCLOC_EV_LEFT) && e->depth < STACK) {
		th->live[e->depth / 64] &= ~(1ull << (e->depth % 64));
	}
	if (e->type == MCLOC_EV_CALL) {
		const char *fn = site_name(t, e->ip, b1, sizeof(b1));

		chrome_event(t, th, "i", fn, ns, e);
		if (t->json) {
			json_event(t, th, e, "call", 0);
		} else if (!t->chrome) {
			size_t len = strlen(th->comm);

			out_spaces(stdout, len < 16 ? 16 - len : 0);
			out_str(stdout, th->comm);
			putc_unlocked('-', stdout);
			out_uint_left(stdout, th->tid, 7);
			out_str(stdout, " [");
			out_uint(stdout, e->cpu, 3, '0');
			out_str(stdout, "] ");
			print_time(ns);
			out_str(stdout, ": ");
			out_str(stdout, fn);
			if (e->ndata)
				put_call_args(e->data, e->ndata);
			out_str(stdout, " <-");
			/* (A graph's entry shown as a call: its parent is the
			 * function it is inside, if the recording has it.) */
			out_str(stdout, e->caller_site ? site_name(t, e->caller_site, b2, sizeof(b2)) :
					e->parent ? caller_name(t, e->parent, b2, sizeof(b2)) : "?");
			put_source(t, e->ip);
			putc_unlocked('\n', stdout);
		}
		return;
	}
	/* function_graph */
	const char *fn = site_name(t, e->ip, b1, sizeof(b1));
	uint64_t dur = e->type == MCLOC_EV_EXIT ? scaled(t, e->parent) : 0;

	if (e->type == MCLOC_EV_ENTRY) {
		chrome_event(t, th, "B", fn, ns, e);
		th->open++;
		if (t->json)
			json_event(t, th, e, "entry", 0);
		graph_flush_pending(t, th);
		th->pending = true;
		th->entry = *e;
		th->entry.data = NULL;
		if (e->ndata && !th->entry_data)
			th->entry_data = malloc(MCLOC_EV_DATA_MAX);
		if (!th->entry_data)
			th->entry.ndata = 0;
		else if (e->ndata)	/* (else e->data is NULL, which memcpy may not take) */
			memcpy(th->entry_data, e->data, e->ndata);
		return;
	}
	if (e->type == MCLOC_EV_EXIT || e->type == MCLOC_EV_LEFT) {
		if (th->open) {
			chrome_event(t, th, "E", fn, ns, e);
			th->open--;
		}
		if (t->json) {
			json_event(t, th, e, e->type == MCLOC_EV_EXIT ? "exit" : "left", dur);
			th->pending = false;
			return;
		}
		if (t->chrome)
			return;
		bool leaf = th->pending && th->entry.ip == e->ip && th->entry.depth == e->depth;

		if (leaf) {
			th->pending = false;
			if (e->type == MCLOC_EV_EXIT && dur < t->threshold_ns)
				return;
			graph_prefix(t, th, e);
			if (e->type == MCLOC_EV_LEFT)
				printf("%16s|  %*s%s(); /* left early (an exception or longjmp): not timed */\n", "",
				       2 * e->depth, "", fn);
			else {
				print_duration(dur);
				out_str(stdout, "  ");
				graph_indent(e->depth, fn);
				put_call_args(th->entry_data, th->entry.ndata);
				putc_unlocked(';', stdout);
				if (e->ndata && has_ret(e->data, e->ndata)) {
					out_str(stdout, " /* = ");
					put_arg_items(stdout, e->data, e->ndata, false, true);
					out_str(stdout, " */");
				}
				put_source(t, e->ip);
				putc_unlocked('\n', stdout);
			}
			return;
		}
		graph_flush_pending(t, th);
		if (e->type == MCLOC_EV_EXIT && dur < t->threshold_ns)
			return;
		graph_prefix(t, th, e);
		/* "}" closes the "{" above; a call begun before the trace
		 * closes with its name, as ftrace writes it. */
		bool named = !th->opened;

		th->opened -= !named;
		if (!named)
			close_at(th);
		if (e->type == MCLOC_EV_LEFT) {
			printf("%16s|  %*s} /* %s: left early (an exception or longjmp) */\n", "", 2 * e->depth, "", fn);
		} else if (e->ndata && has_ret(e->data, e->ndata)) {
			/* (With its value the brace names its call, as ftrace's
			 * funcgraph-retval does.) */
			print_duration(dur);
			printf("  %*s} /* %s = ", 2 * e->depth, "", fn);
			put_arg_items(stdout, e->data, e->ndata, false, true);
			out_str(stdout, " */\n");
		} else if (print_duration(dur), named) {
			printf("  %*s} /* %s */\n", 2 * e->depth, "", fn);
		} else {
			out_str(stdout, "  "), graph_indent(e->depth, "}\n");
		}
		return;
	}
	if (e->type == MCLOC_EV_UNTIMED) {
		if (t->json) {
			json_event(t, th, e, "untimed", 0);
			return;
		}
		chrome_event(t, th, "i", fn, ns, e);
		if (t->chrome)
			return;
		graph_flush_pending(t, th);
		graph_prefix(t, th, e);
		printf("%16s|  %*s%s", "", 2 * e->depth, "", fn);
		put_call_args(e->data, e->ndata);
		out_str(stdout, "; /* its return cannot be hooked: not timed */\n");
	}
}

int sort_key_of(const char *s, enum sort_key *key, const char *who)
{
	static const char *const keys[] = { "total", "self", "calls", "avg", "name" };

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!strcmp(s, keys[k])) {
			*key = (enum sort_key)k;
			return 0;
		}
	fail(who, "--sort: total, self, calls, avg or name");
	return -1;
}

int opt_whole(const char *who, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	      uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (!isdigit((unsigned char)*s) || *end || errno || *v < lo || *v > hi) {
		fail(who, "%s '%s': a whole number from %llu to %llu", opt, s,
		     (unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	return 0;
}

int opt_real(const char *who, const char *opt, const char *s, double *d)
{
	char *end;

	*d = strtod(s, &end);
	if (end == s || *end || !(*d >= 0) || *d > 1e12) {
		fail(who, "%s '%s': a number from 0", opt, s);
		return -1;
	}
	return 0;
}

void bad_option(char *buf, size_t len, const char *arg)
{
	snprintf(buf, len, "'%s': not an option here, or its value is missing; ", arg);
}

static struct tracing *sorting;

static uint64_t avg_ns(const struct hit *h)
{
	uint64_t timed = h->calls - h->untimed;

	return timed ? h->total_ns / timed : 0;
}

/* By thread (--per-thread), then by the --sort key, most first (names in
 * order); ties by calls, then name. */
static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	char b1[32], b2[32];
	uint64_t u, v;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	switch (sorting->sort) {
	case BY_SELF: u = x->self_ns, v = y->self_ns; break;
	case BY_CALLS: u = x->calls, v = y->calls; break;
	case BY_AVG: u = avg_ns(x), v = avg_ns(y); break;
	case BY_NAME: u = v = 0; break;
	default: u = x->total_ns, v = y->total_ns; break;
	}
	if (u != v)
		return u < v ? 1 : -1;
	if (sorting->sort != BY_NAME && x->calls != y->calls)
		return x->calls < y->calls ? 1 : -1;
	return strcmp(site_name(sorting, x->ip, b1, sizeof(b1)),
		      site_name(sorting, y->ip, b2, sizeof(b2)));
}

void print_profile(struct tracing *t)
{
	char b[32];

	sorting = t;
	if (t->nhits)
		qsort(t->hits, t->nhits, sizeof(*t->hits), cmp_hit);
	for (size_t i = 0; i < t->nhits; i++) {
		const struct hit *h = &t->hits[i];
		uint64_t timed = h->calls - h->untimed;
		const char *fn = site_name(t, h->ip, b, sizeof(b));

		if (!t->json && (i == 0 || h->tid != t->hits[i - 1].tid)) {
			if (t->per_thread) {
				struct thread *th = thread_of(t, h->tid, NULL);

				printf("%s# thread %u (%s)\n", i ? "\n" : "", h->tid,
				       th ? th->comm : "?");
			}
			printf("%-40s %12s %14s %12s %14s\n%-40s %12s %14s %12s %14s\n", "Function",
			       "Hit", "Time (us)", "Avg (us)", "Self (us)", "--------", "---",
			       "---------", "--------", "---------");
		}
		if (t->json) {
			putchar('{');
			json_str("function", fn, false);
			/* (The process: a recording may hold several.) */
			if (t->pid)
				printf("\"pid\":%u,", t->pid);
			if (t->per_thread)
				printf("\"tid\":%u,", h->tid);
			printf("\"calls\":%llu,\"timed\":%llu,\"total_ns\":%llu,\"self_ns\":%llu",
			       (unsigned long long)h->calls, (unsigned long long)timed,
			       (unsigned long long)h->total_ns, (unsigned long long)h->self_ns);
			if (h->unreturned)
				printf(",\"unreturned\":%llu", (unsigned long long)h->unreturned);
			puts("}");
		} else if (timed) {
			printf("%-40s %12llu %14.3f %12.3f %14.3f\n", fn,
			       (unsigned long long)h->calls, h->total_ns / 1e3,
			       h->total_ns / 1e3 / (double)timed, h->self_ns / 1e3);
		} else {
			printf("%-40s %12llu %14s %12s %14s\n", fn, (unsigned long long)h->calls,
			       "-", "-", "-");
		}
	}
	/* Which times ran to the end of the events rather than to a return
	 * (the first few names: a server's threads each have one). */
	uint64_t open = 0;
	size_t named = 0;

	for (size_t i = 0; !t->json && i < t->nhits; i++)
		if (t->hits[i].unreturned) {
			if (!open)
				printf("\n# not returned %s, timed to their thread's last event:",
				       t->range_end ? "within the time range" : "when the trace ended");
			open += t->hits[i].unreturned;
			if (named++ < 5)
				printf(t->per_thread ? " %s[%u]" : " %s",
				       site_name(t, t->hits[i].ip, b, sizeof(b)), t->hits[i].tid);
		}
	if (named > 5)
		printf(" and %zu more", named - 5);
	if (open)
		printf(" (%llu call%s)\n", (unsigned long long)open, open == 1 ? "" : "s");
}


void print_header(const struct tracing *t)
{
	if (t->json || t->chrome)
		return;
	if (t->mode == FUNCTION)
		printf("# tracer: function\n#\n"
		       "#            TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
		       "#               | |         |          |         |\n");
	else if (t->mode == GRAPH)
		printf("# tracer: function_graph\n#\n"
		       "# CPU  DURATION                  FUNCTION CALLS\n"
		       "# |     |   |                     |   |   |   |\n");
}

uint64_t thread_end(const struct thread *th)
{
	return th->end_ns > th->last_ns ? th->end_ns : th->last_ns;
}

/*
 * The end of TH's events with calls still open (a program that left
 * through exit(), a thread still running when a trace stopped): each
 * ends when the thread's events end, as dump --chrome and --perfetto end
 * them and uftrace times them to the exit; the braces say so (with a
 * threshold, a call long enough is shown at that end, as any other),
 * and a profile counts them apart.  (Deeper than the stack kept: not
 * timed.)
 */
static void close_open_calls(struct tracing *t, struct thread *th)
{
	uint64_t end = thread_end(th);
	char b[32];

	if (t->mode == PROFILE) {
		if (th->depth > STACK)
			th->depth = STACK;	/* (the calls past it were never kept) */
		while (th->depth) {
			const struct open_call *c = &th->stack[--th->depth];
			struct hit *h = hit_of(t, c->ip, th->tid);

			if (h) {
				h->unreturned++;
				profile_end(th, h, end > c->t0 ? end - c->t0 : 0);
			}
		}
		return;
	}
	if (t->mode != GRAPH || t->json || t->chrome)
		return;
	/* (Without a threshold, those whose "{" was printed.) */
	const uint64_t *open = t->threshold_ns ? th->live : th->open_at;

	for (unsigned d = STACK; d-- > 0;) {
		if (!(open[d / 64] >> (d % 64) & 1))
			continue;
		struct event e = { .cpu = th->cpu, .depth = d };
		uint64_t dur = end > th->stack[d].t0 ? end - th->stack[d].t0 : 0;

		if (dur < t->threshold_ns)
			continue;
		graph_prefix(t, th, &e);
		print_duration(dur);
		printf("  %*s} /* %s: not returned %s */\n", 2 * d, "",
		       site_name(t, th->stack[d].ip, b, sizeof(b)),
		       t->range_end ? "within the time range" : "when the trace ended");
	}
	th->opened = 0;
	memset(th->open_at, 0, sizeof(th->open_at));
	memset(th->live, 0, sizeof(th->live));
}

void chrome_end_process(struct tracing *t)
{
	/* Every call begun ends: those still running at the stop end
	 * there. */
	for (size_t i = 0; i < t->nthreads; i++)
		while (t->threads[i].open--)
			chrome_event(t, &t->threads[i], "E", "", thread_end(&t->threads[i]), NULL);
	/* The names of the process (its main thread's) and its threads, as
	 * the viewers label tracks by them. */
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct thread *th = &t->threads[i];

		if (th->tid == t->pid)
			chrome_name(t, th, "process_name");
		chrome_name(t, th, "thread_name");
	}
}

void finish_output(struct tracing *t)
{
	for (size_t i = 0; i < t->nthreads; i++) {
		graph_flush_pending(t, &t->threads[i]);
		close_open_calls(t, &t->threads[i]);
	}
	if (t->mode == PROFILE)
		print_profile(t);
	if (t->chrome) {
		chrome_end_process(t);
		fprintf(t->chrome, "\n],\"displayTimeUnit\":\"ns\"}\n");
	}
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i].name);
	free(ns->v);
}

void tracing_free(struct tracing *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		free(t->threads[i].entry_data);
	for (size_t i = 0; t->decs && i < t->g.rings; i++)
		decoder_free(&t->decs[i]);
	free(t->decs);
	names_free(&t->sites);
	names_free(&t->callers);
	free(t->threads);
	free(t->hits);
	free(t->items);
	free(t->raw);
	free(t->arena);
	free(t->hit_index);
	free(t->tails);
}
