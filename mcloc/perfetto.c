// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Perfetto's trace format, written by hand: a Trace is a stream of
 * TracePacket messages (field 1, length-delimited), so a packet can be
 * written as soon as it is made, and a trace of any size streams in
 * constant memory, where a JSON viewer must hold it all.  Debian has no C
 * library for Perfetto's protos (libprotobuf-c would need their schema
 * compiled in), and the few messages used here are a page of varints.
 *
 * Used: TracePacket { timestamp = 8; trusted_packet_sequence_id = 10;
 * track_event = 11; interned_data = 12; sequence_flags = 13;
 * track_descriptor = 60 }, TrackDescriptor { uuid = 1; name = 2;
 * process = 3; thread = 4; parent_uuid = 5 }, ProcessDescriptor { pid = 1;
 * process_name = 6 }, ThreadDescriptor { pid = 1; tid = 2; thread_name =
 * 5 }, TrackEvent { debug_annotations = 4; type = 9; name_iid = 10;
 * track_uuid = 11 }, DebugAnnotation { bool_value = 2; uint_value = 3;
 * int_value = 4; double_value = 5; string_value = 6; pointer_value = 7;
 * name = 10 }, InternedData { event_names = 2 }, EventName { iid = 1;
 * name = 2 }.
 * Function names are interned per process (a sequence of its own): each
 * is written once, in the packet of its first event.
 */
#include "perfetto.h"
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

enum { VARINT = 0, FIXED64 = 1, LEN = 2 };

struct buf {
	uint8_t *p;
	size_t n, cap;
	bool failed;
};

static void put(struct buf *b, const void *s, size_t n)
{
	if (!n)
		return;	/* (S may be NULL then: an empty buffer never grown) */
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 256;

		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);

		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void varint(struct buf *b, uint64_t v)
{
	uint8_t d[10];
	size_t n = 0;

	do {
		d[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		d[n++] |= v ? 0x80 : 0;
	} while (v);
	put(b, d, n);
}

static void key(struct buf *b, unsigned field, unsigned wire)
{
	varint(b, (uint64_t)field << 3 | wire);
}

static void field_u(struct buf *b, unsigned field, uint64_t v)
{
	key(b, field, VARINT);
	varint(b, v);
}

static void field_bytes(struct buf *b, unsigned field, const void *s, size_t n)
{
	key(b, field, LEN);
	varint(b, n);
	put(b, s, n);
}

static void field_str(struct buf *b, unsigned field, const char *s)
{
	field_bytes(b, field, s, strlen(s));
}

/* INNER, as field FIELD of B; INNER emptied for reuse. */
static void field_msg(struct buf *b, unsigned field, struct buf *inner)
{
	b->failed |= inner->failed;
	field_bytes(b, field, inner->p, inner->n);
	inner->n = 0;
}

struct perfetto {
	FILE *f;
	struct buf pkt, m1, m2, m3;	/* a packet, and messages inside it */
	struct buf ann;			/* the next event's annotations */
	uint32_t seq;
	bool cleared;			/* the sequence's first packet is out */
	struct u64map iids;		/* a site's interned name, by site */
	uint64_t count;
};

struct perfetto *pf_open(FILE *f)
{
	struct perfetto *p = calloc(1, sizeof(*p));

	if (p)
		p->f = f;
	return p;
}

/* The packet in p->pkt, as one more field 1 of the Trace. */
static void emit(struct perfetto *p)
{
	struct buf out = { 0 };

	field_msg(&out, 1, &p->pkt);
	if (out.failed || fwrite(out.p, 1, out.n, p->f) != out.n)
		p->pkt.failed = true;
	free(out.p);
}

void pf_sequence(struct perfetto *p)
{
	p->seq++;
	p->cleared = false;
	u64map_free(&p->iids);
	p->count = 0;
}

void pf_track(struct perfetto *p, uint64_t uuid, uint32_t pid, uint32_t tid, const char *name,
	      uint64_t parent)
{
	if (tid) {
		field_u(&p->m2, 1, pid);
		field_u(&p->m2, 2, tid);
		field_str(&p->m2, 5, name);
	} else {
		field_u(&p->m2, 1, pid);
		field_str(&p->m2, 6, name);
	}
	field_u(&p->m1, 1, uuid);
	if (parent)
		field_u(&p->m1, 5, parent);
	field_msg(&p->m1, tid ? 4 : 3, &p->m2);
	field_msg(&p->pkt, 60, &p->m1);
	emit(p);
}

/* IP's iid, and whether it is new (to be interned with this packet). */
static uint64_t iid_of(struct perfetto *p, uint64_t ip, bool *fresh)
{
	uint64_t *v = u64map_slot(&p->iids, ip ? ip : ~0ull, fresh);

	if (!v) {
		p->pkt.failed = true;
		return 0;
	}
	if (*fresh)
		*v = ++p->count;
	return *v;
}

void pf_event(struct perfetto *p, uint64_t ns, uint64_t track, enum pf_type type, uint64_t ip,
	      const char *name)
{
	bool fresh = false;
	uint64_t iid = type != PF_END ? iid_of(p, ip, &fresh) : 0;

	field_u(&p->pkt, 8, ns);
	field_u(&p->pkt, 10, p->seq);
	/* SEQ_INCREMENTAL_STATE_CLEARED (1) first, SEQ_NEEDS_INCREMENTAL_STATE
	 * (2) always: names are interned. */
	field_u(&p->pkt, 13, p->cleared ? 2 : 3);
	p->cleared = true;
	if (fresh) {
		field_u(&p->m2, 1, iid);
		field_str(&p->m2, 2, name);
		field_msg(&p->m1, 2, &p->m2);
		field_msg(&p->pkt, 12, &p->m1);
	}
	field_u(&p->m1, 9, type);
	if (iid)
		field_u(&p->m1, 10, iid);
	field_u(&p->m1, 11, track);
	p->m1.failed |= p->ann.failed;
	put(&p->m1, p->ann.p, p->ann.n);
	p->ann.n = 0;
	field_msg(&p->pkt, 11, &p->m1);
	emit(p);
}

/* A DebugAnnotation NAME whose value field FIELD was just put in m3. */
static void annotation(struct perfetto *p, const char *name)
{
	field_str(&p->m3, 10, name);
	field_msg(&p->ann, 4, &p->m3);
}

void pf_arg_int(struct perfetto *p, const char *name, int64_t v)
{
	field_u(&p->m3, 4, (uint64_t)v);	/* (int64: two's complement) */
	annotation(p, name);
}

void pf_arg_uint(struct perfetto *p, const char *name, uint64_t v, bool pointer)
{
	field_u(&p->m3, pointer ? 7 : 3, v);
	annotation(p, name);
}

void pf_arg_bool(struct perfetto *p, const char *name, bool v)
{
	field_u(&p->m3, 2, v);
	annotation(p, name);
}

void pf_arg_double(struct perfetto *p, const char *name, double v)
{
	uint64_t w;
	uint8_t le[8];

	memcpy(&w, &v, 8);
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(w >> 8 * i);
	key(&p->m3, 5, FIXED64);
	put(&p->m3, le, 8);
	annotation(p, name);
}

void pf_arg_str(struct perfetto *p, const char *name, const char *s, size_t n)
{
	field_bytes(&p->m3, 6, s, n);
	annotation(p, name);
}

int pf_close(struct perfetto *p)
{
	int ret = p->pkt.failed || p->m1.failed || p->m2.failed || p->m3.failed || p->ann.failed
		  ? -1 : 0;

	free(p->pkt.p);
	free(p->m1.p);
	free(p->m2.p);
	free(p->m3.p);
	free(p->ann.p);
	u64map_free(&p->iids);
	free(p);
	return ret;
}
