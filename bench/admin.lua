-- wrk script for partyline-control's admin API (used by bench/run; usable by hand).
--
--   export PARTYLINE_ADMIN_TOKEN=...            # the Bearer token the server was started with
--   wrk -t2 -c32 -d15s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups -- get
--   wrk -t1 -c1 -d5s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups/GROUP_ID -- put
--   wrk -t1 -c1 -d10s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups -- post PREFIX [LIMIT [RUN]]
--
-- get:  one static request with the auth header (no per-request Lua, no response parsing).
-- put:  {"audioBitrate": N} with N cycling through 400 distinct values (32..431), so that every
--       request changes the config and really writes the file, even with several connections
--       in flight whose requests the server applies in any order (two requests carrying the
--       same value are 400 requests apart). Start from a group whose bitrate is outside 32..431.
-- post: {"name": "PREFIX rRUN T-N"}, a new group per request (T = wrk thread, N = counter); with
--       LIMIT > 0 each thread stops after LIMIT responses, to bound the growth of the config.
--
-- done() prints one machine-readable line, `BENCH key=value ...` (latencies in microseconds),
-- that bench/run parses; wrk's own --latency report is printed as usual.

local token = os.getenv("PARTYLINE_ADMIN_TOKEN") or ""
wrk.headers["Authorization"] = "Bearer " .. token

local threads = 0
function setup(thread)
   threads = threads + 1
   thread:set("thread_no", threads)
end

local mode, counter, responses, limit, prefix = "get", 0, 0, 0, "Bench"

function init(args)
   mode = args[1] or "get"
   if mode == "get" then
      request = nil -- static request: the fastest path wrk has
      response = nil
   elseif mode == "put" then
      wrk.method = "PUT"
      wrk.headers["Content-Type"] = "application/json"
      response = nil
   elseif mode == "post" then
      wrk.method = "POST"
      wrk.headers["Content-Type"] = "application/json"
      prefix = args[2] or "Bench"
      if args[4] then prefix = prefix .. " r" .. args[4] end -- a run number: new names every run
      limit = tonumber(args[3] or "0") or 0
      if limit <= 0 then response = nil end
   else
      error("admin.lua: unknown mode " .. tostring(mode) .. " (get, put or post)")
   end
end

function request()
   counter = counter + 1
   local body
   if mode == "put" then
      body = string.format('{"audioBitrate":%d}', 32 + (counter % 400))
   else
      body = string.format('{"name":"%s %d-%d"}', prefix, thread_no or 0, counter)
   end
   return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
   responses = responses + 1
   if limit > 0 and responses >= limit then
      wrk.thread:stop()
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   local errors = e.connect + e.read + e.write + e.status + e.timeout
   local seconds = summary.duration / 1e6
   io.write(string.format(
      "BENCH requests=%d duration_us=%d rps=%.1f mean_us=%.0f p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d errors=%d status_errors=%d\n",
      summary.requests, summary.duration, summary.requests / seconds, latency.mean,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      latency.max, errors, e.status))
end
