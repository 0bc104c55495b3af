-- wrk script: AGFS seed workload "list": GET /api/v1/directories?path=WRK_DIR (default
-- /bench/list, which the run script fills with 10,000 files).
function init(args)
  path = string.format("/api/v1/directories?path=%s", os.getenv("WRK_DIR") or "/bench/list")
end

function request()
  return wrk.format("GET", path)
end
