-- wrk script for the Draw-and-Discard server (scripts/bench_ddml.sh): every connection is a
-- device that alternates a draw (GET, binary) and an update (POST, raw little-endian f32).
-- Environment: DIM (weights), DRAW and POST (paths). The update posts back the instance drawn,
-- with the draw's single-use ticket (Privfed-Ticket): a zero step, which passes the update guard;
-- the server's work does not depend on the values. Tickets are queued per wrk thread, so each is
-- used once even when connections interleave. The ceiling route issues no ticket and gets the
-- same request built the same way. Non-2xx answers are counted by wrk as errors.
local dim = tonumber(os.getenv("DIM") or "387")
local draw_path = os.getenv("DRAW") or ("/bench/" .. dim)
local post_path = os.getenv("POST") or ("/bench/" .. dim)
local draw_req
local n = 0
local queue, head, tail = {}, 1, 0

function init(args)
  draw_req = wrk.format("GET", draw_path, { ["Accept"] = "application/octet-stream" }, nil)
end

function response(status, headers, body)
  if #body == 4 * dim then
    tail = tail + 1
    queue[tail] = { headers["privfed-ticket"] or headers["Privfed-Ticket"], body }
  end
end

function request()
  n = n + 1
  -- A post needs a drawn instance: with none queued (at the start, when every connection sends
  -- its first request at once) draw instead.
  if n % 2 == 1 or head > tail then return draw_req end
  local d = queue[head]
  queue[head] = nil
  head = head + 1
  local h = { ["Content-Type"] = "application/octet-stream" }
  if d[1] then h["Privfed-Ticket"] = d[1] end
  return wrk.format("POST", post_path, h, d[2])
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
