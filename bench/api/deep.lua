-- Deep-queue case (deep.sh): GPR creates at random priorities 1-300 into random workspaces and GPU
-- shapes, optionally mixed 1:1 with status reads of the ids given after `--`.
--   wrk ... -s deep.lua URL -- MODE WORKSPACES SHAPES QUOTA [ID...]
-- MODE: "fill" (creates only; each thread stops after QUOTA replies, and wrk waits out -d) or "mixed" (a create,
-- then a read, in turn).  Bodies are built per request: the priority is the point of the case.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

local mode, nws, nshapes, quota = "mixed", 4, 20, 0
local ids, nids, turn, replies = {}, 0, 0, 0
local count_response = response
wrk.headers["Content-Type"] = "application/json"

function init(args)
   mode = args[1] or mode
   nws = tonumber(args[2] or nws)
   nshapes = tonumber(args[3] or nshapes)
   quota = tonumber(args[4] or 0)
   for k = 5, #args do
      nids = nids + 1
      ids[nids] = wrk.format("GET", "/api/v1/gpr?gprId=" .. args[k])
   end
   math.randomseed(os.time() * 1000 + (tid or 1))
end

local function create()
   local nodes = math.random(10) == 1 and math.random(2, 4) or 1
   local body = string.format('{"gprName":"deep","sliceName":"ws-%d","gpuShape":"gpu-%d","numberOfGPUs":%d,'
      .. '"numberOfGPUNodes":%d,"exitDuration":"%dm","priority":%d}',
      math.random(0, nws - 1), math.random(0, nshapes - 1), math.random(8), nodes,
      30 * math.random(16), math.random(300))
   return wrk.format("POST", "/api/v1/gpr", nil, body) -- nil: wrk.headers, with -H Authorization
end

function request()
   turn = turn + 1
   if mode == "mixed" and nids > 0 and turn % 2 == 0 then
      return ids[(turn / 2) % nids + 1]
   end
   return create()
end

function response(status, headers, body)
   count_response(status, headers, body)
   replies = replies + 1
   if quota > 0 and replies >= quota then
      wrk.thread:stop()
   end
end
