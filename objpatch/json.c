// SPDX-License-Identifier: GPL-2.0-or-later
#include "json.h"

void json_init(struct json *j, FILE *out, bool pretty)
{
	*j = (struct json){ .out = out, .pretty = pretty, .first = true };
}

static void sep(struct json *j, const char *key)
{
	if (!j->first)
		fputc(',', j->out);
	if (j->pretty && j->depth) {
		fputc('\n', j->out);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->out);
	}
	j->first = false;
	if (key)
		fprintf(j->out, j->pretty ? "\"%s\": " : "\"%s\":", key);
}

static void quoted(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void json_begin(struct json *j, const char *key, char open)
{
	sep(j, key);
	fputc(open, j->out);
	j->depth++;
	j->first = true;
}

void json_end(struct json *j, char close)
{
	j->depth--;
	if (j->pretty && !j->first) {
		fputc('\n', j->out);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->out);
	}
	fputc(close, j->out);
	j->first = false;
}

void json_str(struct json *j, const char *key, const char *v)
{
	sep(j, key);
	if (v)
		quoted(j->out, v);
	else
		fputs("null", j->out);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	sep(j, key);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	sep(j, key);
	fputs(v ? "true" : "false", j->out);
}

void json_done(struct json *j)
{
	fputc('\n', j->out);
	j->first = true;
}
