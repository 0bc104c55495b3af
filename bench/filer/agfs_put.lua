-- wrk script: AGFS seed workload "PUT": PUT /api/v1/files?path=<dir>/t<thread>-<n> with a body of
-- WRK_BODY_BYTES (default 1024) bytes. Every request writes a fresh file (create + write), each
-- wrk thread in names of its own. WRK_DIR (default /bench/put) must exist.
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  n = 0
  body = string.rep("x", tonumber(os.getenv("WRK_BODY_BYTES") or "1024"))
  dir = os.getenv("WRK_DIR") or "/bench/put"
  run = os.getenv("WRK_RUN") or "0"
end

function request()
  n = n + 1
  return wrk.format("PUT", string.format("/api/v1/files?path=%s/r%s-t%d-%d", dir, run, tid, n), nil, body)
end
