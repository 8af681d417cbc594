-- wrk script for the benchmark's items experiment (lab/experiments.py): every request is
-- POST /items with a small JSON item, so each one inserts a row in the database.
-- Used as `wrk --script lab/items_create.lua URL` (lab/wrk.py); needs wrk 4 (LuaJIT).
-- The Content-Type is required: the app refuses a JSON body sent without it.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name": "bench item", "price_cents": 100, "tags": ["bench"]}'
