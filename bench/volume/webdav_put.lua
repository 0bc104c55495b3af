-- wrk script: PUT a 1 KiB body to a fresh file name per request (nginx WebDAV reference).
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  n = 0
  body = string.rep("x", 1024)
end

function request()
  n = n + 1
  return wrk.format("PUT", string.format("/dav/t%d-%d", tid, n), nil, body)
end
