// Package child is the side of package spawn that runs in the processes
// spawn starts from gitfleet's own executable (/proc/self/exe): an init
// function that, when Env selects it, sets a data limit and becomes git,
// or supervises git, and never returns. It also holds what both sides
// need to set a limit with ptrace (Release, SetDataLimit).
//
// It imports only packages of the standard library that a Go program
// initialises among its first, so that its init runs early too: whatever
// runs before it runs for nothing in every child (in gitfleet, the init
// functions of gRPC, protobuf and the rest). It must never import more.
package child
