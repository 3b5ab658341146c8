package ebsupload

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Retryable reports whether a failed PutSnapshotBlock is worth another
// attempt. Everything is, except errors that say the request itself is
// wrong or not allowed (which a retry repeats) and cancellation. A
// ValidationException about the checksum is retryable: the bytes were
// damaged on the way, and sending them again fixes that.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var (
		denied   *types.AccessDeniedException
		notFound *types.ResourceNotFoundException
		valid    *types.ValidationException
	)
	switch {
	case errors.As(err, &denied), errors.As(err, &notFound):
		return false
	case errors.As(err, &valid):
		return strings.Contains(strings.ToLower(valid.ErrorMessage()), "checksum")
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		s := resp.HTTPStatusCode()
		if s == 429 || s >= 500 {
			return true
		}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "RequestThrottledException", "InternalServerException",
			"ServiceUnavailable", "ServiceUnavailableException", "ConcurrentLimitExceededException",
			"SlowDown", "RequestTimeout", "RequestTimeoutException":
			return true
		}
		if api.ErrorFault() == smithy.FaultServer {
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// Unclassified transport errors (connection reset, EOF mid-body, the
	// SDK's retry quota running dry) are transient by nature.
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
