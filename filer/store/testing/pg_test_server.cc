#include "filer/store/testing/pg_test_server.h"

#include <libpq-fe.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/strings.h"

namespace kelp::filer::testing {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> BinDir() {
  if (const char* env = std::getenv("KELP_PG_BIN"); env && *env) return std::string(env);
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int version = std::atoi(e.path().filename().c_str());
    if (version > best_version && fs::exists(e.path() / "bin" / "initdb")) {
      best_version = version;
      best = (e.path() / "bin").string();
    }
  }
  if (best.empty()) {
    return absl::NotFoundError("no PostgreSQL server binaries (apt-get install postgresql-15, or set KELP_PG_BIN)");
  }
  return best;
}

// Runs args as `user` (when root) with output to log; returns the child's pid.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, const std::string& log, const passwd* user) {
  // Everything the child needs is built before fork: it may only make system calls.
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  uid_t uid = user ? user->pw_uid : 0;
  gid_t gid = user ? user->pw_gid : 0;
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // signals to the test's process group do not reach the server
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (user) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgTestServer>> PgTestServer::Start(const Options& options) {
  auto bin = BinDir();
  if (!bin.ok()) return bin.status();
  const passwd* user = nullptr;
  if (geteuid() == 0) {
    user = getpwnam("postgres");
    if (!user) return absl::NotFoundError("running as root and there is no postgres user to run PostgreSQL as");
  }
  std::unique_ptr<PgTestServer> srv(new PgTestServer());
  std::string tmpl = (fs::temp_directory_path() / "kelp-pg-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return absl::InternalError("mkdtemp failed");
  srv->dir_ = tmpl;
  if (user && chown(tmpl.c_str(), user->pw_uid, user->pw_gid) != 0) {
    return absl::InternalError(StrCat("chown ", tmpl, " failed"));
  }
  chmod(tmpl.c_str(), 0700);
  std::string data = tmpl + "/data";
  std::string log = tmpl + "/log";
  {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      if (user && fchown(fd, user->pw_uid, user->pw_gid) != 0) {
        close(fd);
        return absl::InternalError("chown log failed");
      }
      close(fd);
    }
  }
  auto init = Spawn({*bin + "/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C",
                     "--no-sync", "--no-instructions"},
                    log, user);
  if (!init.ok()) return init.status();
  int status = 0;
  waitpid(*init, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(StrCat("initdb failed: ", Tail(log)));
  }
  std::vector<std::string> args{*bin + "/postgres", "-D", data, "-k", tmpl,
                                "-c", options.tcp_port > 0 ? "listen_addresses=127.0.0.1" : "listen_addresses=",
                                "-c", StrCat("max_connections=", options.max_connections),
                                "-c", options.fsync ? "fsync=on" : "fsync=off"};
  if (options.tcp_port > 0) {
    args.push_back("-p");
    args.push_back(StrCat(options.tcp_port));
  }
  auto pid = Spawn(args, log, user);
  if (!pid.ok()) return pid.status();
  srv->pid_ = *pid;
  srv->dsn_ = options.tcp_port > 0 ? StrCat("host=127.0.0.1 port=", options.tcp_port, " user=postgres dbname=postgres")
                                   : StrCat("host=", tmpl, " port=", options.tcp_port > 0 ? options.tcp_port : 5432,
                                            " user=postgres dbname=postgres");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (PQping(srv->dsn_.c_str()) != PQPING_OK) {
    if (waitpid(srv->pid_, &status, WNOHANG) == srv->pid_) {
      srv->pid_ = -1;
      return absl::InternalError(StrCat("postgres exited: ", Tail(log)));
    }
    if (std::chrono::steady_clock::now() > deadline) return absl::DeadlineExceededError("postgres did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return srv;
}

absl::StatusOr<std::string> PgTestServer::CreateDatabase(const std::string& name) {
  PGconn* c = PQconnectdb(dsn_.c_str());
  std::unique_ptr<PGconn, void (*)(PGconn*)> guard(c, PQfinish);
  if (PQstatus(c) != CONNECTION_OK) return absl::UnavailableError(PQerrorMessage(c));
  PGresult* r = PQexec(c, StrCat("CREATE DATABASE ", name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string err = PQresultErrorMessage(r);
  PQclear(r);
  if (!ok) return absl::InternalError(StrCat("create database ", name, ": ", err));
  std::string dsn = dsn_;
  dsn.replace(dsn.rfind("dbname=postgres"), std::string("dbname=postgres").size(), "dbname=" + name);
  return dsn;
}

PgTestServer::~PgTestServer() {
  if (pid_ > 0) {
    kill(pid_, SIGINT);  // fast shutdown
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

PgTestServer& SharedPgTestServer() {
  static std::unique_ptr<PgTestServer> server = [] {
    auto s = PgTestServer::Start();
    if (!s.ok()) FAIL("cannot start PostgreSQL: " << s.status().ToString());
    return std::move(*s);
  }();
  return *server;
}

}  // namespace kelp::filer::testing
