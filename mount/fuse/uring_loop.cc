#include "mount/fuse/uring_loop.h"

#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>

#include "mount/fuse/raw_io.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/strings.h"

namespace kelp::mount::fuse {
namespace {

// The kernel's ring ABI (include/uapi/linux/fuse.h, 7.42), absent from Debian 12's header.
constexpr size_t kInOutSize = 128;  // the in header of a request; the out header of a reply
constexpr size_t kOpInSize = 128;   // the operation's own struct (fuse_write_in, ...)
struct RingEntInOut {
  uint64_t flags;
  uint64_t commit_id;   // names the request in the commit
  uint32_t payload_sz;  // bytes in the payload buffer, either way
  uint32_t padding;
  uint64_t reserved;
};
struct RingReqHeader {
  char in_out[kInOutSize];
  char op_in[kOpInSize];
  RingEntInOut ent;
};
struct RingCmdReq {  // in the SQE's command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;

constexpr uint64_t kEntryTag = 1;  // the entry's command completed: a request came (or an error)
constexpr uint64_t kStopTag = 2;   // the stop eventfd fired
constexpr size_t kPage = 4096;
// Room before the payload for the in header and the operation's struct, so that the request
// lies contiguous ahead of its payload.
constexpr size_t kHeadroom = kPage;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The CPUs of a kernel CPU list file ("0-1", "0", "0-3,8-11"); empty when it cannot be read.
std::vector<bool> CpuList(const char* path) {
  std::vector<bool> cpus;
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return cpus;
  char line[1024];
  if (std::fgets(line, sizeof line, f)) {
    for (char* p = line; *p >= '0' && *p <= '9';) {
      char* end;
      long first = std::strtol(p, &end, 10);
      long last = first;
      if (*end == '-') last = std::strtol(end + 1, &end, 10);
      if (first < 0 || last < first || last >= 65536) break;
      if (cpus.size() <= static_cast<size_t>(last)) cpus.resize(last + 1, false);
      for (long c = first; c <= last; ++c) cpus[c] = true;
      p = *end == ',' ? end + 1 : end;
    }
  }
  std::fclose(f);
  return cpus;
}

}  // namespace

class UringLoop::Queue {
 public:
  Queue(fuse_session* se, int fd, int qid, size_t payload_size, Counter* requests)
      : se_(se),
        fd_(fd),
        qid_(qid),
        payload_size_(RoundUp(payload_size, kPage)),
        requests_(requests) {}
  ~Queue() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (event_fd_ >= 0) ::close(event_fd_);
    std::free(header_);
    std::free(buf_);
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // On the queue's own thread (the kernel runs the ring's work in the task that submitted):
  // pins it to the queue's CPU, sets up the ring and registers the entry.
  absl::Status Init() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(qid_, &set);
    (void)sched_setaffinity(0, sizeof set, &set);  // best effort: a CPU may be offline
    header_ = static_cast<RingReqHeader*>(
        std::aligned_alloc(kPage, RoundUp(sizeof(RingReqHeader), kPage)));
    buf_ = static_cast<char*>(std::aligned_alloc(kPage, kHeadroom + payload_size_));
    if (header_ == nullptr || buf_ == nullptr)
      return absl::ResourceExhaustedError("no memory for a FUSE ring entry");
    std::memset(header_, 0, sizeof *header_);
    event_fd_ = eventfd(0, EFD_CLOEXEC);
    if (event_fd_ < 0) return absl::InternalError(kelp::StrCat("eventfd: ", std::strerror(errno)));
    io_uring_params p;
    std::memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;
    if (int rc = io_uring_queue_init_params(4, &ring_, &p); rc < 0) {
      return absl::UnavailableError(kelp::StrCat("io_uring setup: ", std::strerror(-rc)));
    }
    ring_ok_ = true;
    int files[1] = {fd_};
    if (int rc = io_uring_register_files(&ring_, files, 1); rc < 0) {
      return absl::UnavailableError(
          kelp::StrCat("io_uring file registration: ", std::strerror(-rc)));
    }
    iov_[0] = {header_, sizeof(RingReqHeader)};
    iov_[1] = {buf_ + kHeadroom, payload_size_};
    io_uring_sqe* stop = io_uring_get_sqe(&ring_);
    if (stop == nullptr) return absl::InternalError("io_uring: no submission slot");
    io_uring_prep_poll_add(stop, event_fd_, POLLIN);
    stop->user_data = kStopTag;
    PrepCmd(kCmdRegister);
    return absl::OkStatus();
  }

  // The thread's loop: submits what is prepared (the registration, then each commit with its
  // fetch) and runs each request that comes, until stopped or the connection ends.
  void Run() {
    for (;;) {
      int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR) {
        spdlog::warn("FUSE ring {}: {}", qid_, std::strerror(-rc));
        return;
      }
      io_uring_cqe* cqe;
      while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
        uint64_t tag = cqe->user_data;
        int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        if (tag == kStopTag) return;
        if (res == -EINTR || res == -EAGAIN) {
          PrepCmd(last_cmd_);  // the same command again
          continue;
        }
        if (res != 0) {
          // ENOTCONN: the connection ended (unmounted or aborted).
          if (res != -ENOTCONN && res != -ENODEV)
            spdlog::warn("FUSE ring {}: {}", qid_, std::strerror(-res));
          return;
        }
        Handle();
      }
    }
  }

  char* ReplyBuffer(size_t size) {
    return replied_ || size > payload_size_ ? nullptr : buf_ + kHeadroom;
  }

  void Stop() {
    uint64_t one = 1;
    if (event_fd_ >= 0) (void)!::write(event_fd_, &one, sizeof one);
  }

  std::optional<ssize_t> Commit(const iovec* iov, int count) {
    fuse_out_header h;
    if (count < 1 || iov[0].iov_len < sizeof h) return std::nullopt;
    std::memcpy(&h, iov[0].iov_base, sizeof h);
    if (replied_ || h.unique != unique_) return std::nullopt;
    size_t total = 0;
    for (int i = 1; i < count; ++i) total += iov[i].iov_len;
    size_t written = sizeof h + total;
    if (total > payload_size_) {
      spdlog::error("FUSE ring: a reply of {} bytes exceeds the entry's {}", total, payload_size_);
      h.error = -EIO;
      total = 0;
    } else {
      char* to = buf_ + kHeadroom;
      for (int i = 1; i < count; ++i) {
        if (iov[i].iov_base != to)
          std::memmove(to, iov[i].iov_base, iov[i].iov_len);  // else built in place
        to += iov[i].iov_len;
      }
    }
    SetReply(h, total);
    return static_cast<ssize_t>(written);
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
    if (cmd == kCmdRegister) {
      sqe->addr = reinterpret_cast<uintptr_t>(iov_);
      sqe->len = 2;
    }
    RingCmdReq req;
    std::memset(&req, 0, sizeof req);
    req.qid = static_cast<uint16_t>(qid_);
    req.commit_id = cmd == kCmdCommitAndFetch ? commit_id_ : 0;
    std::memcpy(sqe->cmd, &req, sizeof req);
    sqe->user_data = kEntryTag;
    last_cmd_ = cmd;
  }

  void SetReply(fuse_out_header h, size_t payload) {
    h.len = static_cast<uint32_t>(sizeof h + payload);
    std::memcpy(header_->in_out, &h, sizeof h);
    uint32_t sz = static_cast<uint32_t>(payload);
    std::memcpy(reinterpret_cast<char*>(header_) + offsetof(RingReqHeader, ent) +
                    offsetof(RingEntInOut, payload_sz),
                &sz, sizeof sz);
    PrepCmd(kCmdCommitAndFetch);
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
    RingEntInOut ent;
    std::memcpy(&ent, &header_->ent, sizeof ent);
    commit_id_ = ent.commit_id;
    replied_ = false;
    unique_ = in.unique;
    size_t payload = ent.payload_sz;
    if (in.len < sizeof in + payload || in.len - sizeof in - payload > kOpInSize ||
        payload > payload_size_) {
      spdlog::error("FUSE ring: request {} of opcode {} has length {} with a payload of {}",
                    in.unique, in.opcode, in.len, payload);
      ReplyError(in.unique, EIO);
      return;
    }
    size_t op = in.len - sizeof in - payload;
    char* msg = buf_ + kHeadroom - op - sizeof in;
    std::memcpy(msg, &in, sizeof in);
    std::memcpy(msg + sizeof in, header_->op_in, op);
    NoteRequest(msg, in.len);
    fuse_buf b;
    std::memset(&b, 0, sizeof b);
    b.size = in.len;
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

 public:
  // The queue whose request the calling thread runs, or null.
  static Queue*& current() {
    static thread_local Queue* q = nullptr;
    return q;
  }

 private:
  fuse_session* const se_;
  const int fd_;
  const int qid_;
  const size_t payload_size_;
  io_uring ring_;
  bool ring_ok_ = false;
  int event_fd_ = -1;
  RingReqHeader* header_ = nullptr;
  char* buf_ = nullptr;
  iovec iov_[2];
  uint32_t last_cmd_ = kCmdRegister;
  uint64_t commit_id_ = 0;
  uint64_t unique_ = 0;
  bool replied_ = true;
  Counter* const requests_;
};

absl::StatusOr<std::unique_ptr<UringLoop>> UringLoop::Start(fuse_session* se, int fd,
                                                            Options options) {
  std::unique_ptr<UringLoop> loop(new UringLoop());
  // The kernel keeps a queue per possible CPU and moves to the ring only once each has an
  // entry: a CPU that is not online gets one thread, never busy until it comes online.
  std::vector<bool> possible = CpuList("/sys/devices/system/cpu/possible");
  std::vector<bool> online = CpuList("/sys/devices/system/cpu/online");
  if (possible.empty()) possible.assign(static_cast<size_t>(sysconf(_SC_NPROCESSORS_CONF)), true);
  const int per_queue = options.threads_per_queue < 1 ? 1 : options.threads_per_queue;
  Counter* requests = MetricsRegistry::Default().GetCounter(
      "kelp_mount_fuse_uring_requests_total",
      "FUSE requests that came over io_uring (the others came over /dev/fuse)");
  for (size_t q = 0; q < possible.size(); ++q) {
    if (!possible[q]) continue;
    const bool up = online.empty() || (q < online.size() && online[q]);
    for (int t = 0; t < (up ? per_queue : 1); ++t) {
      loop->queues_.push_back(
          std::make_unique<Queue>(se, fd, static_cast<int>(q), options.payload_size, requests));
    }
  }
  // Every thread sets up its ring first; they register their entries only when all could:
  // the kernel moves to the ring once every CPU's queue has an entry, and an entry that then
  // went away would leave its queue's requests waiting.
  std::vector<std::future<absl::Status>> ready;
  std::promise<bool> go;
  std::shared_future<bool> all_ready = go.get_future().share();
  for (auto& q : loop->queues_) {
    auto started = std::make_shared<std::promise<absl::Status>>();
    ready.push_back(started->get_future());
    loop->threads_.emplace_back([queue = q.get(), started, all_ready] {
      absl::Status s = queue->Init();
      started->set_value(s);
      if (s.ok() && all_ready.get()) queue->Run();
    });
  }
  absl::Status first;
  for (auto& f : ready) {
    absl::Status s = f.get();
    if (!s.ok() && first.ok()) first = s;
  }
  go.set_value(first.ok());
  if (!first.ok()) {
    loop->Stop();
    return first;
  }
  return loop;
}

UringLoop::~UringLoop() { Stop(); }

void UringLoop::Stop() {
  for (auto& q : queues_) q->Stop();
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
