/*
 * Run a program as on a kernel without membarrier SYNC_CORE: a seccomp
 * filter makes the system call fail as such a kernel would, then the
 * program is executed (qemu-user too: its guests' membarrier calls are
 * made by the host kernel, which this filter then answers).
 *   nomembarrier enosys PROG ARGS...      membarrier itself is missing
 *   nomembarrier nosynccore PROG ARGS...  only its SYNC_CORE commands are
 * For the host the tests run on (x86_64); other architectures' system
 * calls are killed, as usual.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define IS(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

int main(int argc, char **argv)
{
	struct sock_filter enosys[] = {
		LD(arch), IS(AUDIT_ARCH_X86_64, 1, 0), RET(SECCOMP_RET_KILL_PROCESS),
		LD(nr), IS(SYS_membarrier, 0, 1), RET(SECCOMP_RET_ERRNO | ENOSYS),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_filter nosynccore[] = {
		LD(arch), IS(AUDIT_ARCH_X86_64, 1, 0), RET(SECCOMP_RET_KILL_PROCESS),
		LD(nr), IS(SYS_membarrier, 0, 4),
		LD(args[0]), IS(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 1, 0),
		IS(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 1),
		RET(SECCOMP_RET_ERRNO | EINVAL),
		RET(SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog;

	if (argc < 3) {
		fprintf(stderr, "usage: nomembarrier enosys|nosynccore PROG ARGS...\n");
		return 2;
	}
	if (!strcmp(argv[1], "enosys"))
		prog = (struct sock_fprog){ sizeof(enosys) / sizeof(*enosys), enosys };
	else if (!strcmp(argv[1], "nosynccore"))
		prog = (struct sock_fprog){ sizeof(nosynccore) / sizeof(*nosynccore), nosynccore };
	else
		return 2;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("nomembarrier: seccomp");
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror("nomembarrier: exec");
	return 127;
}
