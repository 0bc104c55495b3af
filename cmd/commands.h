// Entry points of the kelp subcommands. Each takes the arguments after the subcommand name
// and returns the process exit code (2 for bad flags).
#pragma once

namespace kelp {

int ServerMain(int argc, char** argv);     // cmd/server_main.cc
int FilerMain(int argc, char** argv);      // filer/filer_main.cc
int FsckMain(int argc, char** argv);       // filer/fsck_main.cc
int CopyMain(int argc, char** argv);       // filer/copy_main.cc
int VolumeMain(int argc, char** argv);     // volume/volume_main.cc
int MountMain(int argc, char** argv);      // mount/mount_main.cc
int BenchmarkMain(int argc, char** argv);  // cmd/benchmark_main.cc
int SecurityTokenMain(int argc, char** argv);  // cmd/security_token_main.cc
int VersionMain(int argc, char** argv);    // cmd/version_main.cc

}  // namespace kelp
