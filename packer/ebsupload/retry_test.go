package ebsupload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func httpErr(status int, err error) error {
	return &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      err,
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"cancelled", fmt.Errorf("put: %w", context.Canceled), false},
		{"access denied", httpErr(403, &types.AccessDeniedException{Message: aws.String("no")}), false},
		{"not found", &types.ResourceNotFoundException{Message: aws.String("gone")}, false},
		{"bad parameter", httpErr(400, &types.ValidationException{Message: aws.String("bad block index")}), false},
		{"checksum mismatch", httpErr(400, &types.ValidationException{Message: aws.String("The Checksum does not match")}), true},
		{"throttled", httpErr(429, &types.RequestThrottledException{Message: aws.String("slow")}), true},
		{"throttling code", &smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{"internal", &types.InternalServerException{Message: aws.String("x")}, true},
		{"bare 503", httpErr(503, errors.New("unknown")), true},
		// The status decides where the error code says nothing known.
		{"500, unknown code", httpErr(500, &smithy.GenericAPIError{Code: "InternalFailure"}), true},
		{"429, unknown code", httpErr(429, &smithy.GenericAPIError{Code: "TooManyRequests", Fault: smithy.FaultClient}), true},
		{"400, unknown client error", httpErr(400, &smithy.GenericAPIError{Code: "SomethingElse", Fault: smithy.FaultClient}), false},
		{"other client error", &smithy.GenericAPIError{Code: "SomethingElse", Fault: smithy.FaultClient}, false},
		{"server fault", &smithy.GenericAPIError{Code: "SomethingElse", Fault: smithy.FaultServer}, true},
		{"transport", errors.New("connection reset by peer"), true},
		{"nil", nil, false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("%s: Retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
