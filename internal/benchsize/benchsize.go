// Package benchsize gives a benchmark the size of its input: the full one
// that a measurement runs (and docs/benchmarks.md reports), or a tiny one
// under -short. CI runs every benchmark once that way (-benchtime 1x
// -short), so that a change that breaks a benchmark fails the build
// instead of rotting until someone next measures; the tiny size keeps that
// run to seconds a package. Tests and benchmarks only import it.
package benchsize

import "testing"

// Of is full, or short when the run is -short.
func Of[T any](full, short T) T {
	if testing.Short() {
		return short
	}
	return full
}
