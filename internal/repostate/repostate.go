// Package repostate holds what the roles must agree on about the state of
// a mirrored repository, so that a node's scheduler and the coordinator's
// status reach the same verdict from the same answers of an upstream: when
// "not found" answers make a repository gone.
//
// It holds constants only: no state, no I/O, no imports, so that every
// role, pure cores included, may import it.
package repostate

// GoneAfter is how many "not found" answers in a row from its upstream make
// a repository gone: its node parks it and checks it again once a day
// (package schedule), and the coordinator reports it gone.
const GoneAfter = 5
