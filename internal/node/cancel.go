package node

import "errors"

// errCancelled is the cause of a check that the operator cancelled.
var errCancelled = errors.New("cancelled by the operator")
