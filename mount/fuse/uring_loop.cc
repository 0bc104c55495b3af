#include "mount/fuse/uring_loop.h"

#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "mount/fuse/raw_io.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/strings.h"

namespace kelp::mount::fuse {

using uring_abi::ReqHeader;

std::vector<bool> ParseCpuList(std::string_view list) {
  std::vector<bool> cpus;
  size_t i = 0;
  auto number = [&](long* v) {
    size_t start = i;
    *v = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9' && *v < 1000000)
      *v = *v * 10 + (list[i++] - '0');
    return i > start;
  };
  while (i < list.size() && list[i] != '\n') {
    long first, last;
    if (!number(&first)) return {};
    last = first;
    if (i < list.size() && list[i] == '-') {
      ++i;
      if (!number(&last)) return {};
    }
    if (last < first || last >= 65536) return {};
    if (cpus.size() <= static_cast<size_t>(last)) cpus.resize(static_cast<size_t>(last) + 1, false);
    for (long c = first; c <= last; ++c) cpus[static_cast<size_t>(c)] = true;
    if (i < list.size() && list[i] == ',') ++i;
  }
  return cpus;
}

char* RebuildRequest(const ReqHeader& header, char* payload, size_t headroom,
                     size_t payload_capacity, size_t* len) {
  fuse_in_header in;
  std::memcpy(&in, header.in_out, sizeof in);
  const size_t body = header.ent.payload_sz;
  // in.len counts the operation's struct (copied to op_in, possibly empty) and the payload.
  if (body > payload_capacity || in.len < sizeof in + body) return nullptr;
  const size_t op = in.len - sizeof in - body;
  if (op > uring_abi::kOpInSize || sizeof in + op > headroom) return nullptr;
  char* msg = payload - op - sizeof in;
  std::memcpy(msg, &in, sizeof in);
  std::memcpy(msg + sizeof in, header.op_in, op);
  *len = in.len;
  return msg;
}

std::optional<size_t> CopyReplyArgs(const iovec* iov, int count, char* payload, size_t capacity) {
  size_t total = 0;
  for (int i = 1; i < count; ++i) total += iov[i].iov_len;
  if (total > capacity) return std::nullopt;
  char* to = payload;
  for (int i = 1; i < count; ++i) {
    if (iov[i].iov_base != to)
      std::memmove(to, iov[i].iov_base, iov[i].iov_len);  // else built in place
    to += iov[i].iov_len;
  }
  return total;
}

namespace {

constexpr uint64_t kEntryTag = 1;  // the entry's command completed: a request came (or an error)
constexpr uint64_t kStopTag = 2;   // the stop eventfd fired

size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::vector<bool> ReadCpuList(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return {};
  return ParseCpuList(line);
}

}  // namespace

class UringLoop::Queue {
 public:
  Queue(fuse_session* se, int fd, int stop_fd, int qid, bool pin, size_t payload_size,
        Counter* requests)
      : se_(se),
        fd_(fd),
        stop_fd_(stop_fd),
        qid_(qid),
        pin_(pin),
        page_(PageSize()),
        payload_size_(RoundUp(payload_size, page_)),
        requests_(requests) {}
  ~Queue() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    std::free(header_);
    std::free(buf_);
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // On the queue's own thread (the kernel runs the ring's work in the task that submitted):
  // pins it to the queue's CPU, sets up the ring and prepares the entry's registration.
  absl::Status Init() {
    if (pin_) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(qid_, &set);
      (void)sched_setaffinity(0, sizeof set, &set);  // best effort
    }
    header_ = static_cast<ReqHeader*>(std::aligned_alloc(page_, RoundUp(sizeof(ReqHeader), page_)));
    // The headroom in front of the payload takes the in header and the operation's struct.
    buf_ = static_cast<char*>(std::aligned_alloc(page_, page_ + payload_size_));
    if (header_ == nullptr || buf_ == nullptr)
      return absl::ResourceExhaustedError("no memory for a FUSE ring entry");
    std::memset(static_cast<void*>(header_), 0, sizeof *header_);
    io_uring_params p;
    std::memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;
    if (int rc = io_uring_queue_init_params(4, &ring_, &p); rc < 0) {
      return absl::UnavailableError(kelp::StrCat("io_uring setup: ", std::strerror(-rc)));
    }
    ring_ok_ = true;
    int files[1] = {fd_};  // registered: the ring holds /dev/fuse open for its commands
    if (int rc = io_uring_register_files(&ring_, files, 1); rc < 0) {
      return absl::UnavailableError(
          kelp::StrCat("io_uring file registration: ", std::strerror(-rc)));
    }
    iov_[0] = {header_, sizeof(ReqHeader)};
    iov_[1] = {buf_ + page_, payload_size_};
    io_uring_sqe* stop = io_uring_get_sqe(&ring_);
    if (stop == nullptr) return absl::InternalError("io_uring: no submission slot");
    io_uring_prep_poll_add(stop, stop_fd_, POLLIN);
    stop->user_data = kStopTag;
    PrepCmd(uring_abi::kCmdRegister);
    return absl::OkStatus();
  }

  // The thread's loop: submits what is prepared (the registration, then each commit with its
  // fetch) and runs each request that comes, until stopped or the connection ends.
  void Run() {
    for (;;) {
      int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        spdlog::error("FUSE ring {}: {}", qid_, std::strerror(-rc));
        return;
      }
      io_uring_cqe* cqe;
      while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
        uint64_t tag = cqe->user_data;
        int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        if (tag == kStopTag) return;
        if (res == 0) {
          Handle();
          continue;
        }
        if (res == -EINTR || res == -EAGAIN) {
          PrepCmd(last_cmd_);  // the same command again
        } else if (res == -ENOTCONN || res == -ENODEV || res == -ECONNABORTED) {
          return;  // the connection ended (unmounted or aborted)
        } else if (last_cmd_ == uring_abi::kCmdRegister) {
          // The kernel falls back to /dev/fuse for a connection whose registration it refused.
          spdlog::warn("FUSE ring {}: the kernel refused the entry: {}", qid_, std::strerror(-res));
          return;
        } else {
          spdlog::warn("FUSE ring {}: the kernel refused a reply: {}; registering the entry anew",
                       qid_, std::strerror(-res));
          PrepCmd(uring_abi::kCmdRegister);
        }
      }
    }
  }

  std::optional<ssize_t> Commit(const iovec* iov, int count) {
    fuse_out_header h;
    if (count < 1 || iov[0].iov_len < sizeof h) return std::nullopt;
    std::memcpy(&h, iov[0].iov_base, sizeof h);
    if (replied_ || h.unique != unique_) return std::nullopt;
    size_t written = sizeof h;
    for (int i = 1; i < count; ++i) written += iov[i].iov_len;
    std::optional<size_t> args = CopyReplyArgs(iov, count, buf_ + page_, payload_size_);
    if (!args) {
      spdlog::error("FUSE ring: a reply of {} bytes exceeds the entry's {}", written - sizeof h,
                    payload_size_);
      h.error = -EIO;
    }
    SetReply(h, args.value_or(0));
    return static_cast<ssize_t>(written);
  }

  char* ReplyBuffer(size_t size) {
    return replied_ || size > payload_size_ ? nullptr : buf_ + page_;
  }

  // The queue whose request the calling thread runs, or null.
  static Queue*& current() {
    static thread_local Queue* q = nullptr;
    return q;
  }

 private:
  void PrepCmd(uint32_t cmd) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // cannot happen: at most two are in flight in a ring of four
      spdlog::error("FUSE ring {}: no submission slot", qid_);
      return;
    }
    std::memset(static_cast<void*>(sqe), 0, 2 * sizeof *sqe);  // an SQE128 spans two slots
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->fd = 0;  // the registered /dev/fuse
    sqe->cmd_op = cmd;
    if (cmd == uring_abi::kCmdRegister) {
      sqe->addr = reinterpret_cast<uintptr_t>(iov_);
      sqe->len = 2;
    }
    uring_abi::CmdReq req;
    std::memset(&req, 0, sizeof req);
    req.qid = static_cast<uint16_t>(qid_);
    req.commit_id = cmd == uring_abi::kCmdCommitAndFetch ? commit_id_ : 0;
    std::memcpy(sqe->cmd, &req, sizeof req);
    sqe->user_data = kEntryTag;
    last_cmd_ = cmd;
  }

  void SetReply(fuse_out_header h, size_t payload) {
    h.len = static_cast<uint32_t>(sizeof h + payload);
    std::memcpy(header_->in_out, &h, sizeof h);
    header_->ent.payload_sz = static_cast<uint32_t>(payload);
    PrepCmd(uring_abi::kCmdCommitAndFetch);
    replied_ = true;
  }

  void ReplyError(uint64_t unique, int err) {
    fuse_out_header h;
    std::memset(&h, 0, sizeof h);
    h.unique = unique;
    h.error = -err;
    SetReply(h, 0);
  }

  // Rebuilds the request as /dev/fuse delivers it, in front of its payload, and runs it.
  void Handle() {
    fuse_in_header in;
    std::memcpy(&in, header_->in_out, sizeof in);
    commit_id_ = header_->ent.commit_id;
    unique_ = in.unique;
    replied_ = false;
    size_t len = 0;
    char* msg = RebuildRequest(*header_, buf_ + page_, page_, payload_size_, &len);
    if (msg == nullptr) {
      spdlog::error("FUSE ring: request {} of opcode {} has length {} with a payload of {}",
                    in.unique, in.opcode, in.len, header_->ent.payload_sz);
      ReplyError(in.unique, EIO);
      return;
    }
    NoteRequest(msg, len);
    fuse_buf b;
    std::memset(&b, 0, sizeof b);
    b.size = len;
    b.mem = msg;
    current() = this;
    fuse_session_process_buf(se_, &b);
    current() = nullptr;
    requests_->Inc();
    if (!replied_) {
      spdlog::error("FUSE ring: opcode {} ended without a reply; answered EIO", in.opcode);
      ReplyError(in.unique, EIO);
    }
  }

  fuse_session* const se_;
  const int fd_;
  const int stop_fd_;
  const int qid_;
  const bool pin_;
  const size_t page_;
  const size_t payload_size_;
  Counter* const requests_;
  io_uring ring_;
  bool ring_ok_ = false;
  ReqHeader* header_ = nullptr;
  char* buf_ = nullptr;  // a page of headroom, then the payload
  iovec iov_[2];
  uint32_t last_cmd_ = uring_abi::kCmdRegister;
  uint64_t commit_id_ = 0;
  uint64_t unique_ = 0;
  bool replied_ = true;
};

absl::StatusOr<std::unique_ptr<UringLoop>> UringLoop::Prepare(fuse_session* se, int fd,
                                                              Options options) {
  // The kernel keeps a queue per possible CPU and serves nothing until each has an entry.
  std::vector<bool> possible = ReadCpuList("/sys/devices/system/cpu/possible");
  std::vector<bool> online = ReadCpuList("/sys/devices/system/cpu/online");
  if (possible.empty())
    return absl::UnavailableError("cannot read /sys/devices/system/cpu/possible");
  std::unique_ptr<UringLoop> loop(new UringLoop());
  loop->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (loop->stop_fd_ < 0)
    return absl::InternalError(kelp::StrCat("eventfd: ", std::strerror(errno)));
  const int per_queue = options.threads_per_queue < 1 ? 1 : options.threads_per_queue;
  Counter* requests = MetricsRegistry::Default().GetCounter(
      "kelp_mount_fuse_uring_requests_total",
      "FUSE requests that came over io_uring (the others came over /dev/fuse)");
  for (size_t q = 0; q < possible.size(); ++q) {
    if (!possible[q]) continue;
    // A CPU that is not online gets one thread, which waits until it comes online.
    const bool up = q < online.size() && online[q];
    for (int t = 0; t < (up ? per_queue : 1); ++t) {
      loop->queues_.push_back(std::make_unique<Queue>(se, fd, loop->stop_fd_, static_cast<int>(q),
                                                      up, options.payload_size, requests));
    }
  }
  std::vector<std::future<absl::Status>> ready;
  std::shared_future<bool> go = loop->go_.get_future().share();
  for (auto& q : loop->queues_) {
    auto started = std::make_shared<std::promise<absl::Status>>();
    ready.push_back(started->get_future());
    loop->threads_.emplace_back([queue = q.get(), started, go] {
      absl::Status s = queue->Init();
      started->set_value(s);
      if (s.ok() && go.get()) queue->Run();
    });
  }
  absl::Status first;
  for (auto& f : ready) {
    absl::Status s = f.get();
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok()) {
    loop->Stop();
    return first;
  }
  return loop;
}

UringLoop::~UringLoop() {
  Stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void UringLoop::Go(bool taken) {
  if (went_) return;
  went_ = true;
  go_.set_value(taken);
}

void UringLoop::Stop() {
  Go(false);  // threads still waiting end
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

std::optional<ssize_t> UringLoop::CommitReply(const iovec* iov, int count) {
  Queue* q = Queue::current();
  if (q == nullptr) return std::nullopt;
  return q->Commit(iov, count);
}

char* UringLoop::ReplyBuffer(size_t size) {
  Queue* q = Queue::current();
  return q == nullptr ? nullptr : q->ReplyBuffer(size);
}

}  // namespace kelp::mount::fuse
