-- GPR status read: GET /api/v1/gpr?gprId=ID, rotating over the ids given after `--`.
-- The requests are formatted once per thread in init, so the per-request Lua cost is a table index.
-- run.sh points the same script at nginx, which serves the byte-identical body for each id.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

local reqs, n, i = {}, 0, 0

function init(args)
   for _, id in ipairs(args) do
      n = n + 1
      reqs[n] = wrk.format("GET", "/api/v1/gpr?gprId=" .. id)
   end
   if n == 0 then
      n = 1
      reqs[1] = wrk.format()
   end
   i = ((tid or 1) - 1) * 7 % n
end

function request()
   i = i % n + 1
   return reqs[i]
end
