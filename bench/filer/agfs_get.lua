-- wrk script: AGFS seed workload "GET": GET /api/v1/files?path=<dir>/f<i> over WRK_FILES (default
-- 100) files the run script wrote beforehand, round robin from a different start per thread.
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  files = tonumber(os.getenv("WRK_FILES") or "100")
  dir = os.getenv("WRK_DIR") or "/bench/get"
  n = tid * 7
end

function request()
  n = n + 1
  return wrk.format("GET", string.format("/api/v1/files?path=%s/f%d", dir, n % files))
end
