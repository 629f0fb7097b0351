-- GPR create: POST /api/v1/gpr with a fixed body (one GPU on one node for an hour, medium priority).
-- The request is static (no per-request Lua); only the response hook in stats.lua runs per reply.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "stats.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"gprName":"bench","sliceName":"bench","clusterName":"bench-1","numberOfGPUs":1,'
   .. '"numberOfGPUNodes":1,"exitDuration":"1h","priority":101}'
