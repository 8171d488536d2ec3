/* python/scripts/crash_backtrace.c — LD_PRELOAD diagnostic: on SIGSEGV / SIGABRT / SIGBUS print the
 * native call stack (glibc backtrace_symbols_fd) and the load address of every mapped shared object,
 * then re-raise. Python's faulthandler (3.12) shows only Python frames; this shows which library
 * crashed. Built by tools/device_bundle.sh into build-carry/lib; used by import_order_check.py.
 * backtrace() is not async-signal-safe in general; for a post-mortem of a crashing process that
 * is acceptable. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int print_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (info->dlpi_name && info->dlpi_name[0]) dprintf(2, "  [crash_backtrace] %p %s\n", (void*)info->dlpi_addr, info->dlpi_name);
  return 0;
}

static void on_signal(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  dprintf(2, "[crash_backtrace] signal %d (%s), %d native frames:\n", sig, strsignal(sig), n);
  backtrace_symbols_fd(frames, n, 2);
  dprintf(2, "[crash_backtrace] loaded objects (base name):\n");
  dl_iterate_phdr(print_object, NULL);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  signal(SIGSEGV, on_signal);
  signal(SIGABRT, on_signal);
  signal(SIGBUS, on_signal);
}
