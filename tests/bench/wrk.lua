-- A request per call from a body template: "{n}" becomes a value unique to this run, so that
-- appends that need a fresh id never collide. done() prints one JSON line for the runner.
local method = os.getenv("WRK_METHOD") or "POST"
local key = os.getenv("WRK_KEY") or ""
local run = os.getenv("WRK_RUN") or "run"
local template = ""
local body_file = os.getenv("WRK_BODY_FILE")
if body_file then
  local handle = assert(io.open(body_file, "rb"))
  template = handle:read("*a")
  handle:close()
end

local paths = {}
for path in string.gmatch(os.getenv("WRK_PATHS") or "", "%S+") do
  table.insert(paths, path)
end

local threads = {}
local counter = 0
local prefix = run

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  prefix = run .. "-" .. tostring(thread_id or 0)
end

wrk.method = method
wrk.headers["Content-Type"] = "application/json"
if key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end

function request()
  counter = counter + 1
  local body = (template:gsub("{n}", prefix .. "-" .. counter))
  local path = nil
  if #paths > 0 then
    path = paths[counter % #paths + 1]
  end
  return wrk.format(method, path, nil, body)
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"status_errors":%d,"socket_errors":%d,'
      .. '"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
