-- batch.lua - wrk script: every request is a bulk submit of 100 jobs (POST /v1/jobs:batch, 207 after the one
-- commit that holds them all). BATCH_JOBS in the environment changes the count; BATCH_PREFER sets Prefer.
local n = tonumber(os.getenv("BATCH_JOBS") or "100")
local jobs = {}
for i = 1, n do
    jobs[i] = '{"type":"bench","payload":{"n":' .. i .. '}}'
end
wrk.method = "POST"
wrk.body = '{"jobs":[' .. table.concat(jobs, ",") .. ']}'
wrk.headers["Content-Type"] = "application/json"
local prefer = os.getenv("BATCH_PREFER")
if prefer ~= nil and prefer ~= "" then
    wrk.headers["Prefer"] = prefer
end
