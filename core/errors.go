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
)

func errorf(format string, args ...any) error {
	return fmt.Errorf("gopherpace: "+format, args...)
}
