//go:build cgo

package cli

// The capability drop of proc.ProtectEngine, made before the Go runtime
// starts: a constructor runs while the process has one thread, so seven
// prctl calls there drop the capabilities from the bounding set every
// later thread inherits, and ProtectEngine, which finds them gone, has
// nothing left to do on every thread through psx (seven rounds of a
// signal to each thread and a wait for its handler: 0.7 ms of CPU, and
// milliseconds of waiting on a loaded machine, on every engine's start).
// Only for the commands that start an engine (run, schema, mcp,
// executor), which drops them anyway (the CLI never sets
// config.Env.KeepCapabilities), in every program built on this package
// (bashvisor, bashvisor-fleet, demo): not for version or check, not for
// the sandbox helper, and not in test binaries. Only root has the
// capabilities to drop; without cgo the engine drops them through psx as
// before.

/*
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

// CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, CAP_SYS_MODULE,
// CAP_SYS_RAWIO, CAP_SYS_BOOT: proc's memoryCapabilities. The command is
// read from /proc/self/cmdline (only glibc hands constructors the
// arguments; musl does not).
__attribute__((constructor)) static void bashvisor_drop_memory_capabilities(void) {
	static const int caps[] = {19, 21, 39, 38, 16, 17, 22};
	static const char *engines[] = {"run", "schema", "mcp", "executor"};
	char buf[256];
	ssize_t n = 0, r;
	int fd, engine = 0;
	if (geteuid() != 0 || (fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) < 0) {
		return;
	}
	while (n < (ssize_t)sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) {
		n += r;
	}
	close(fd);
	buf[n] = 0;
	size_t first = strlen(buf); // argv[0]; argv[1] follows its NUL
	if ((ssize_t)first + 1 >= n) {
		return;
	}
	for (unsigned i = 0; i < sizeof engines / sizeof engines[0]; i++) {
		engine |= strcmp(buf + first + 1, engines[i]) == 0;
	}
	if (!engine) {
		return;
	}
	for (unsigned i = 0; i < sizeof caps / sizeof caps[0]; i++) {
		prctl(PR_CAPBSET_DROP, caps[i], 0, 0, 0); // EINVAL: a capability this kernel does not know
	}
}
*/
import "C"
