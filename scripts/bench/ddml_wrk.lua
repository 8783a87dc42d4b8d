-- wrk script for the Draw-and-Discard server (scripts/bench_ddml.sh): every connection is a
-- device that alternates a draw (GET, binary) and an update (POST, raw little-endian f32).
-- Environment: DIM (weights), DRAW and POST (paths). The update body is a fixed finite vector
-- (the server's work does not depend on the values; create the model without a spam filter).
-- Non-2xx answers are counted by wrk as errors ("Non-2xx or 3xx responses").
local dim = tonumber(os.getenv("DIM") or "387")
local draw_path = os.getenv("DRAW") or ("/bench/" .. dim)
local post_path = os.getenv("POST") or ("/bench/" .. dim)
local draw_req, post_req
local n = 0

function init(args)
  local body = string.rep("\0\0\0\0", dim)
  draw_req = wrk.format("GET", draw_path, { ["Accept"] = "application/octet-stream" }, nil)
  post_req = wrk.format("POST", post_path,
    { ["Content-Type"] = "application/octet-stream" }, body)
end

function request()
  n = n + 1
  if n % 2 == 1 then return draw_req else return post_req end
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    '{"requests":%d,"updates_per_second":%.1f,"request_p50_ms":%.3f,"request_p99_ms":%.3f,' ..
    '"request_p999_ms":%.3f,"non_2xx":%d,"socket_errors":%d}\n',
    summary.requests, summary.requests / 2 / s, latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, latency:percentile(99.9) / 1e3, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
