// Running as a service: readiness and stopping reported to systemd (the sd_notify protocol, a
// datagram to $NOTIFY_SOCKET, spoken here without libsystemd), and detaching into the
// background the way mount(8) helpers do, with the parent exiting only once the child is up.
//
//   DaemonOptions d;  AddDaemonFlags(flags, d);  flags.ParseOrExit(...);
//   if (d.daemon) RETURN_IF_ERROR(Daemonize(d));   // before any thread is started
//   ...start the service...
//   NotifyReady("mounted /mnt/x");                  // parent exits 0, systemd sees READY=1
//   WaitForTerminationSignal();
//   NotifyStopping();                               // systemd sees STOPPING=1
//
// Thread-safety: Daemonize on the main thread before any other thread exists; NotifyReady and
// NotifyStopping from any one thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "shared/flags.h"

namespace kelp {

struct DaemonOptions {
  // Detach into the background; the starting process exits 0 once the service is ready, or
  // with the service's exit code (1 if it had none) if it ends before. Default: false.
  bool daemon = false;
  // Where the detached process logs once it is ready (appended); empty = /dev/null, or the
  // journal when systemd gave stderr one ($JOURNAL_STREAM). Until ready, errors go to the
  // starting process's stderr. Default: empty.
  std::string log_file;
};

// Process set-up for the data path, first thing in main: buffers of up to 32 MiB (dirty chunks,
// packed uploads, request and reply bodies) come from malloc's heap and stay there when freed
// (up to 512 MiB of free heap), rather than each being a fresh mmap whose every page faults on
// first touch; and the soft limit on open files is raised to the hard one, up to 65,536 (the
// mount keeps read-cache entry files open, servers hold many connections).
void SetUpProcess();

// Registers -daemon and -logFile.
void AddDaemonFlags(FlagSet& flags, DaemonOptions& opts);

// Forks. The parent waits until the child calls NotifyReady() and exits 0, or until the child
// exits and exits with its code; it never returns. The child starts a new session and returns
// OK; until it is ready it logs only warnings and errors (they reach the caller's stderr).
// Errors (fork, pipe) are returned in the caller's process.
absl::Status Daemonize(const DaemonOptions& opts);

// The service is up: a waiting parent (Daemonize) exits 0, the child's stdin, stdout and stderr
// move to DaemonOptions::log_file, and systemd is told READY=1 with status as STATUS=. Only the
// first call does anything.
void NotifyReady(std::string_view status = "");

// The service is shutting down (systemd: STOPPING=1).
void NotifyStopping();

// Sends state (e.g. "READY=1\nSTATUS=up") to $NOTIFY_SOCKET: a path, or an abstract socket
// when it starts with '@'. OK without doing anything when the variable is not set.
absl::Status SdNotify(std::string_view state);

}  // namespace kelp
