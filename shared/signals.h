// Blocks SIGINT/SIGTERM/SIGHUP in every thread (call first thing in main, before any thread
// starts) and later waits for one of them, so a service's Stop() runs on the main thread.
#pragma once

namespace kelp {

void BlockTerminationSignals();
// Returns the signal number that arrived.
int WaitForTerminationSignal();

}  // namespace kelp
