// SPDX-License-Identifier: GPL-2.0-or-later
#include "lto.h"
#include "mcelf.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool mce_is_bitcode(const char *path)
{
	/* "BC" 0xC0DE raw; 0x0B17C0DE (little-endian) for the wrapper that
	 * Darwin and -fembed-bitcode put around it. */
	static const unsigned char raw[4] = { 'B', 'C', 0xc0, 0xde };
	static const unsigned char wrap[4] = { 0xde, 0xc0, 0x17, 0x0b };
	unsigned char m[4];
	/* (Never blocks on a FIFO: only a regular file is read.) */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	bool bc = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, m, sizeof(m)) == sizeof(m))
		bc = !memcmp(m, raw, 4) || !memcmp(m, wrap, 4);
	close(fd);
	return bc;
}

/* Whether the space-separated, quoted option list OPTS holds an option
 * that begins with PREFIX ("'-p'" for exactly -p). */
static bool has_option(const char *opts, size_t len, const char *prefix)
{
	size_t pl = strlen(prefix);

	for (size_t i = 0; i + pl <= len; i++)
		if (!memcmp(opts + i, prefix, pl) && (i == 0 || opts[i - 1] == ' '))
			return true;
	return false;
}

void mce_lto_of(struct mce_file *f, struct mce_lto_info *info)
{
	*info = (struct mce_lto_info){ .kind = MCE_LTO_NONE };
	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if (mce_sec_exec(s) && s->sh.sh_size)
			info->fat = true;
		if (strncmp(s->name, ".gnu.lto_", 9))
			continue;
		info->kind = MCE_LTO_GCC;
		if (strcmp(s->name, ".gnu.lto_.opts"))
			continue;
		/* GCC writes the compile's options there, each quoted. */
		Elf_Data *d = mce_sec_data(f, s);

		if (!d || !d->d_buf)
			continue;
		info->profile = has_option(d->d_buf, d->d_size, "'-p'") ||
				has_option(d->d_buf, d->d_size, "'-pg'");
		info->patchable = has_option(d->d_buf, d->d_size,
					     "'-fpatchable-function-entry=");
	}
	if (info->kind == MCE_LTO_NONE)
		info->fat = false;
}

void mce_lto_probe(const char *path, struct mce_lto_info *info)
{
	struct mce_file f;

	*info = (struct mce_lto_info){ .kind = MCE_LTO_NONE };
	if (mce_is_bitcode(path)) {
		info->kind = MCE_LTO_BITCODE;
		return;
	}
	if (mce_open(&f, path) == 0)
		mce_lto_of(&f, info);
	mce_close(&f);
}
