-- wrk script: PUT a 1 KiB body (or WRK_BODY_BYTES) to a fresh fid on volume 1 per request.
-- Each wrk thread counts its own keys from a disjoint range, so no two requests share a fid.
-- WRK_QUERY is appended to every path (e.g. "?fsync=true" for durable writes).
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  n = 0
  local size = tonumber(os.getenv("WRK_BODY_BYTES") or "1024")
  body = string.rep("x", size)
  base = (tid + 1) * 0x10000000 + (tonumber(os.getenv("WRK_KEY_BASE") or "0"))
  query = os.getenv("WRK_QUERY") or ""
end

function request()
  n = n + 1
  return wrk.format("PUT", string.format("/1,%x%08x%s", base + n, 0x12345678, query), nil, body)
end
