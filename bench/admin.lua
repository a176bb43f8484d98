-- wrk script for partyline-control's admin API (used by bench/run; usable by hand).
--
--   export PARTYLINE_ADMIN_TOKEN=...            # the Bearer token the server was started with
--   wrk -t2 -c32 -d15s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups -- get
--   wrk -t1 -c1 -d5s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups/GROUP_ID -- put
--   wrk -t1 -c1 -d10s --latency -s bench/admin.lua http://127.0.0.1:PORT/api/admin/groups -- post PREFIX [LIMIT [RUN]]
--   wrk -t2 -c25 -d60s --latency -s bench/admin.lua http://127.0.0.1:PORT -- mixed DELAY_MS GROUP_ID...
--
-- get:  one static request with the auth header (no per-request Lua, no response parsing).
-- put:  {"audioBitrate": N} with N cycling through 400 distinct values (32..431), so that every
--       request changes the config and really writes the file, even with several connections
--       in flight whose requests the server applies in any order (two requests carrying the
--       same value are 400 requests apart). Start from a group whose bitrate is outside 32..431.
-- post: {"name": "PREFIX rRUN T-N"}, a new group per request (T = wrk thread, N = counter); with
--       LIMIT > 0 each thread stops after LIMIT responses, to bound the growth of the config.
-- mixed: what an admin UI and join pages do, paced: each connection waits DELAY_MS between
--       requests (wrk's delay()), so the rate is about connections x 1000 / DELAY_MS. Nine reads
--       (the admin UI's groups, stats, users, server users and config, the join page's groups)
--       to one durable write (PUT audioBitrate on one of GROUP_IDs, cycling as in put).
--
-- done() prints one machine-readable line, `BENCH key=value ...` (latencies in microseconds),
-- that bench/run parses; wrk's own --latency report is printed as usual.

local token = os.getenv("PARTYLINE_ADMIN_TOKEN") or ""
wrk.headers["Authorization"] = "Bearer " .. token

local threads = {}
function setup(thread)
   table.insert(threads, thread)
   thread:set("thread_no", #threads)
end

local mode, counter, responses, limit, prefix = "get", 0, 0, 0, "Bench"
local pace_ms, write_groups, reads = 0, {}, {
   "/api/admin/groups", "/api/admin/stats", "/api/admin/users",
   "/api/admin/server-users", "/api/admin/config", "/api/groups",
}
writes = 0

function init(args)
   mode = args[1] or "get"
   -- wrk paces only when delay() exists (checked after init): keep the other modes unpaced.
   if mode ~= "mixed" then delay = nil end
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
   elseif mode == "mixed" then
      pace_ms = tonumber(args[2] or "0") or 0
      for i = 3, #args do table.insert(write_groups, args[i]) end
      if #write_groups == 0 then error("admin.lua: mixed needs at least one GROUP_ID") end
      response = nil
   else
      error("admin.lua: unknown mode " .. tostring(mode) .. " (get, put, post or mixed)")
   end
end

function delay()
   return pace_ms
end

local function mixed_request()
   if counter % 10 == 0 then
      writes = writes + 1
      local group = write_groups[1 + (writes % #write_groups)]
      local body = string.format('{"audioBitrate":%d}', 32 + (counter % 400))
      local headers = { ["Content-Type"] = "application/json" }
      for name, value in pairs(wrk.headers) do headers[name] = value end
      return wrk.format("PUT", "/api/admin/groups/" .. group, headers, body)
   end
   return wrk.format("GET", reads[1 + (counter % #reads)])
end

function request()
   counter = counter + 1
   if mode == "mixed" then return mixed_request() end
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
   local write_count = 0
   for _, thread in ipairs(threads) do write_count = write_count + (thread:get("writes") or 0) end
   io.write(string.format(
      "BENCH requests=%d duration_us=%d rps=%.1f mean_us=%.0f p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d errors=%d status_errors=%d puts=%d\n",
      summary.requests, summary.duration, summary.requests / seconds, latency.mean,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      latency.max, errors, e.status, write_count))
end
