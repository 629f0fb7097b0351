-- Shared by read.lua and create.lua: counts every response whose status is not 200 (per thread,
-- in a response hook) and, when the run is over, prints one machine-readable line that run.sh parses:
--   BENCH requests=N non200=N errors=N rps=X p50_us=X p90_us=X p99_us=X max_us=X codes=S
-- "errors" are wrk's socket errors (connect, read, write, timeout); "codes" lists the non-200 statuses.
local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("tid", #threads)   -- lets read.lua start each thread at a different id
end

non200 = 0
codes = ""
local seen = {}

function response(status, headers, body)
   if status ~= 200 then
      non200 = non200 + 1
      if not seen[status] then
         seen[status] = true
         codes = codes .. (codes == "" and "" or ",") .. status
      end
   end
end

function done(summary, latency, requests)
   local bad, list, have = 0, {}, {}
   for _, t in ipairs(threads) do
      bad = bad + t:get("non200")
      for c in string.gmatch(t:get("codes"), "%d+") do
         if not have[c] then
            have[c] = true
            list[#list + 1] = c
         end
      end
   end
   local e = summary.errors
   local errors = e.connect + e.read + e.write + e.timeout
   io.write(string.format(
      "BENCH requests=%d non200=%d errors=%d rps=%.0f p50_us=%d p90_us=%d p99_us=%d max_us=%d codes=%s\n",
      summary.requests, bad, errors, summary.requests / (summary.duration / 1e6),
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
      #list > 0 and table.concat(list, ",") or "-"))
end
