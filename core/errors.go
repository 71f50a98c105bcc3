package gopherpace

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidCost is returned for a request of zero or fewer tokens.
	ErrInvalidCost = errors.New("gopherpace: cost must be >= 1")
	// ErrCostExceedsLimit is returned for a request of more tokens than the
	// bucket holds: it could never be allowed.
	ErrCostExceedsLimit = errors.New("gopherpace: cost exceeds the bucket size")
	// ErrRefundExceedsSpent is returned for a refund of more tokens than the
	// key can have spent within its bucket's window: nothing is given back.
	ErrRefundExceedsSpent = errors.New("gopherpace: refund exceeds what the key spent")
)

func errorf(format string, args ...any) error {
	return fmt.Errorf("gopherpace: "+format, args...)
}
