-- submit.lua - wrk script: every request is a durable job submit (POST /v1/jobs, 202 after commit).
wrk.method = "POST"
wrk.body = '{"type":"bench","payload":{"n":1}}'
wrk.headers["Content-Type"] = "application/json"
