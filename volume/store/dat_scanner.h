// Reads the needles of a .dat region in file order, through a read-ahead buffer. Used by
// start-up recovery (to index needles the .idx lacks) and by vacuum (to carry over the
// writes that landed while it copied).
//
// Threads: one thread per scanner. The file may be appended to concurrently; the scanner
// only reads below the `end` it was given.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "volume/store/env.h"
#include "volume/store/needle.h"

namespace kelp::volume {

class DatScanner {
 public:
  enum class Step {
    kNeedle,   // needle() is an intact needle at offset()
    kEnd,      // reached end exactly
    kTorn,     // the bytes from offset() to end are not a needle: a torn tail
    kCorrupt,  // a needle-shaped region with a bad checksum, followed by an intact needle;
               // Next() continues after it
    kError,    // I/O error: see status()
  };

  DatScanner(const File& file, uint64_t start, uint64_t end)
      : file_(file), offset_(start), end_(end) {}

  Step Next();
  uint64_t offset() const { return offset_; }  // of the needle (or tear) Next() stopped at
  const DecodedNeedle& needle() const { return needle_; }
  // The raw bytes of the last kNeedle step, padding included; valid until the next call.
  std::string_view raw() const { return raw_; }
  const absl::Status& status() const { return status_; }

 private:
  // Makes [off, off+n) readable; returns a pointer into the buffer or nullptr on I/O error.
  const char* Window(uint64_t off, size_t n);
  // Whether a needle starts intact at off (used to tell mid-file corruption from a torn tail).
  bool IntactAt(uint64_t off);

  const File& file_;
  uint64_t offset_;
  uint64_t next_ = 0;  // where the following step starts
  bool started_ = false;
  const uint64_t end_;
  std::string buf_;
  uint64_t buf_start_ = 0;
  DecodedNeedle needle_;
  std::string_view raw_;
  absl::Status status_;
};

}  // namespace kelp::volume
