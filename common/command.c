// SPDX-License-Identifier: GPL-2.0-or-later
#include "command.h"

#include "diag.h"

#include <errno.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

#define LISTED(a, list, prefix) listed(a, list, sizeof(list) / sizeof(list[0]), prefix)

/* Whether A is one of the N words of LIST, or, with PREFIX, begins with
 * one. */
static bool listed(const char *a, const char *const *list, size_t n, bool prefix)
{
	for (size_t i = 0; i < n; i++)
		if (prefix ? !strncmp(a, list[i], strlen(list[i])) : !strcmp(a, list[i]))
			return true;
	return false;
}

bool mc_ccargs_takes_value(const char *a)
{
	static const char *const opts[] = {
		"-o", "-x", "-I", "-D", "-U", "-MF", "-MT", "-MQ", "-include", "-imacros",
		"-isystem", "-idirafter", "-iprefix", "-iwithprefix", "-iquote", "-isysroot",
		"-Xpreprocessor", "-Xassembler", "-Xlinker", "-Xclang", "-L", "-l", "-u",
		"-T", "-aux-info", "-dumpbase", "-dumpdir", "--param", "-arch", "-target",
		"-z", "--sysroot", "-B", "-e", "-wrapper", "-dumpbase-ext",
	};

	return LISTED(a, opts, false);
}

bool mc_ccargs_is_source(const char *a)
{
	static const char *const ext[] = {
		".c", ".i", ".cc", ".cp", ".cxx", ".cpp", ".c++", ".C", ".ii", ".s", ".S",
		".sx", ".m", ".mi", ".mm", ".M", ".f", ".F", ".f90", ".F90",
	};
	const char *dot = strrchr(a, '.');

	if (a[0] == '-' || !dot || strchr(dot, '/'))
		return false;
	return LISTED(dot, ext, false);
}

static bool is_launcher(const char *cmd)
{
	static const char *const launchers[] = { "ccache", "sccache", "distcc", "icecc", "icerun" };
	const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;

	return LISTED(base, launchers, false);
}

/* Whether A makes a compiler driver (GCC's or Clang's) print an answer
 * and stop, whatever else its command line holds. */
static bool is_query(const char *a)
{
	static const char *const pre[] = { "-print-", "--print-", "--help=" };
	static const char *const exact[] = {
		"-dumpmachine", "-dumpversion", "-dumpfullversion", "-dumpspecs",
		"--version", "--help", "--target-help", "-###",
	};

	return LISTED(a, pre, true) || LISTED(a, exact, false);
}

const char *mc_ccargs_driver(int argc, char *const *argv)
{
	int i = 0;

	/* (A launcher given an option first runs its own default compiler,
	 * or is not compiling at all: it stays the driver.) */
	while (i + 1 < argc && argv[i + 1][0] != '-' && is_launcher(argv[i]))
		i++;
	return argv[i];
}

bool mc_ccargs_no_link(const struct mc_ccargs *c)
{
	return c->query || c->ninputs == 0;
}

void mc_ccargs_read(int argc, char *const *argv, struct mc_ccargs *c)
{
	/* (The linker's own options are no driver's: ld's -M prints a map,
	 * and its --print-map, --version-script=... link.) */
	bool driver = argc > 0 && mc_linker_prefix(mc_ccargs_driver(argc, argv)) < 0;
	bool other = false;

	*c = (struct mc_ccargs){ 0 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (driver && is_query(a))
			c->query = true;
		if (driver && !strcmp(a, "-c"))
			c->objects = true;
		else if (driver && (!strcmp(a, "-S") || !strcmp(a, "-E") || !strcmp(a, "-M") ||
				    !strcmp(a, "-MM") || !strcmp(a, "-fsyntax-only")))
			other = true;
		else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc)
			c->output = argv[c->output_arg = ++i];
		else if (!strncmp(a, "--output=", 9))
			c->output = argv[c->output_arg = i] + 9;
		else if (!strncmp(a, "-o", 2) && a[2])
			c->output = argv[c->output_arg = i] + 2;
		else if (mc_ccargs_takes_value(a) && i + 1 < argc)
			c->ninputs += !strcmp(argv[i++], "-l");
		else if (a[0] != '-' || !strcmp(a, "-") || !strncmp(a, "-l", 2)) {
			c->ninputs++;
			c->nsources += mc_ccargs_is_source(a) || !strcmp(a, "-");
		}
	}
	c->compile_only = c->objects || other;
	if (other)
		c->objects = false;
}

int mc_linker_prefix(const char *argv0)
{
	/* The command's own name, not its directory's ("old.d/gcc" is no
	 * linker): "ld" or "TRIPLET-ld", or either with ".bfd", ".gold"... */
	const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
	size_t l = strlen(base);
	const char *dot = strstr(base, "ld.");

	if (l >= 2 && !strcmp(base + l - 2, "ld") && (l == 2 || base[l - 3] == '-'))
		return (int)(base - argv0) + (int)l - 2;
	if (dot && (dot == base || dot[-1] == '-'))
		return (int)(dot - argv0);
	return -1;
}

int mc_run(char *const *argv, const char *what)
{
	pid_t pid;
	int st, err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);

	if (err) {
		mc_error(argv[0], "cannot run %s: %s", what, strerror(err));
		return 127;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			mc_error(argv[0], "cannot wait for %s: %s", what, strerror(errno));
			return 1;
		}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	mc_error(argv[0], "%s died of signal %d", what, WTERMSIG(st));
	return 128 + WTERMSIG(st);
}

bool mc_special_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}
