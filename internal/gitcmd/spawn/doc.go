// Package spawn starts gitcmd's git processes on Linux, without a shell in
// between: each in its own process group that dies with gitfleet
// (Pdeathsig), under a data-segment limit (RLIMIT_DATA) that is in force
// before git's first instruction, and, for commands whose helpers wait on
// the network, under a supervisor that kills the whole group when gitfleet
// dies.
//
// The limit is set by the parent while git is stopped by ptrace on its way
// out of execve (PTRACE_TRACEME, then prlimit and PTRACE_DETACH). Where
// ptrace is refused (a seccomp profile, a debugger), and for the
// supervisor, the package starts its own executable again (/proc/self/exe):
// an init function of this package then does the child's side before
// anything else of the program runs. Its imports are kept to the standard
// library and x/sys so that it runs early among a program's init functions:
// the later it runs, the more of gitfleet starts up for nothing in each
// child.
//
// It knows nothing of git's commands: gitcmd decides what runs, under what
// limit, and which commands are supervised. Other systems have none of
// this; gitcmd starts git directly there.
package spawn
