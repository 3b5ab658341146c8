// Package jsoncompare measures the JSON request decoders hotpath could use
// for a handler's body (issue 35, item 2), on a realistic POST /v1/score
// body: allocations and time per decode into a struct that is reused
// across requests, as a per-worker decoder would be. It has only tests and
// benchmarks; it lives in the peers module so that the libraries compared
// stay out of hotpath's go.mod. server/jsondec's package comment holds the
// table these produced and the decision taken from it.
//
//	cd tests/peers && go test -run '^$' -bench . -benchmem ./jsoncompare/
//	cd tests/peers && GOEXPERIMENT=jsonv2 go test -run '^$' -bench . -benchmem ./jsoncompare/
package jsoncompare
