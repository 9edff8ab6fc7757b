/* The whole userspace of the boot test: PID 1 in a one-file initramfs.
 * It turns the function tracer on for every function the kernel offers,
 * prints one summary line that boot.sh parses, then restarts the machine,
 * which qemu's -no-reboot turns into qemu's exit.  Static, no shell, so
 * the same source runs on every architecture the script boots. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <unistd.h>

#define T "/tracing"

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int c;

	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	return close(fd) == 0 && ok ? 0 : -1;
}

/* The first line of a tracefs file that starts with KEY, past KEY. */
static long field(const char *path, const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key))) {
			v = atol(line + strlen(key));
			break;
		}
	fclose(f);
	return v;
}

/* ftrace_bug() prints "[ ftrace bug ]" and "ftrace failed to ..."; a
 * record ftrace could not touch also says "ftrace faulted". */
static const char *ftrace_bug_in_log(void)
{
	static const char *const marks[] = { "ftrace bug", "ftrace_bug",
		"ftrace failed", "ftrace faulted", "Failed to init ftrace" };
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf;
	size_t i;

	if (len <= 0 || !(buf = calloc(1, (size_t)len + 1)))
		return "unknown";
	len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
	if (len < 0)
		return "unknown";
	for (i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		if (strstr(buf, marks[i]))
			return "yes";
	return "no";
}

int main(void)
{
	long avail, enabled, entries;
	int on;

	mkdir(T, 0755);
	if (mount("tracefs", T, "tracefs", 0, NULL))
		perror("MCLOC-BOOT: mount tracefs");
	avail = count_lines(T "/available_filter_functions");
	on = write_str(T "/current_tracer", "function") == 0;
	enabled = count_lines(T "/enabled_functions");
	usleep(100000);	/* let the tracer see some calls */
	write_str(T "/tracing_on", "0");
	entries = field(T "/per_cpu/cpu0/stats", "entries:");
	printf("MCLOC-BOOT: available_filter_functions=%ld function_tracer=%s "
	       "enabled_functions=%ld trace_entries=%ld ftrace_bug=%s\n",
	       avail, on ? "on" : "FAILED", enabled, entries,
	       ftrace_bug_in_log());
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
