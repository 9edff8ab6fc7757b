/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A minimal streaming JSON writer for -j (compact) and -p (pretty). */
#ifndef MCLOC_JSON_H
#define MCLOC_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *out;
	bool pretty;
	int depth;
	bool first;	/* no comma before the next value at this depth */
};

void json_init(struct json *j, FILE *out, bool pretty);
void json_begin(struct json *j, const char *key, char open);	/* '{' or '[' */
void json_end(struct json *j, char close);
void json_str(struct json *j, const char *key, const char *v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_bool(struct json *j, const char *key, bool v);
void json_done(struct json *j);

#endif
