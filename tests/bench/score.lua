-- POST /v1/score for the bench's "api" scenario: the same body every
-- time, items.SampleScoreBody (server/examples/catalog/items; its test
-- checks that this copy is the same).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"user_id":48213,"item_id":42,"session":"7f3a9c2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b","features":[0.125,3.5,-1.25,42,0.001,7.75,2.5,-0.5],"country":"DE","premium":true,"age":34,"min_score":0.25,"tags":["new","sale","caf\\u00e9"],"explain":false}'
