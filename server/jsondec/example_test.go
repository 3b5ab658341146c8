package jsondec_test

import (
	"fmt"

	"github.com/hotpath-dev/hotpath/server/jsondec"
)

type scoreRequest struct {
	ItemID   string    `json:"item_id"`
	Features []float64 `json:"features"`
	Premium  bool      `json:"premium"`
}

var scoreSchema = jsondec.MustSchema[scoreRequest]()

func Example() {
	// In a handler: decoders.For(c.WorkerCPU()), one Decoder per worker.
	decoders := jsondec.NewPerCPU(jsondec.Options{DisallowUnknownFields: true})
	d := decoders.For(0)

	var req scoreRequest
	err := scoreSchema.Decode(d, []byte(`{"item_id":"sku-42","features":[0.5,2],"premium":true}`), &req)
	fmt.Printf("%+v %v\n", req, err)

	err = scoreSchema.Decode(d, []byte(`{"item_id":"sku-42","features":[0.5,"x"]}`), &req)
	e := err.(*jsondec.Error)
	fmt.Println(e.Offset, e.Field, e.Reason)

	err = scoreSchema.Decode(d, []byte(`{"item_id":"sku-42","colour":"red"}`), &req)
	fmt.Println(err)
	// Output:
	// {ItemID:sku-42 Features:[0.5 2] Premium:true} <nil>
	// 36 features expected a number
	// jsondec: unknown member at offset 20 (member "colour")
}
