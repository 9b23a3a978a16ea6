// Package spawn starts gitcmd's git processes on Linux, without a shell in
// between: each in its own process group that dies with gitfleet
// (Pdeathsig), under a data-segment limit (RLIMIT_DATA) that is in force
// before git's first instruction, and, for commands whose helpers wait on
// the network, under a supervisor that kills the whole group when gitfleet
// dies.
//
// The limit is set by the parent while git is stopped by ptrace on its way
// out of execve (PTRACE_TRACEME, then prlimit and PTRACE_DETACH): that
// costs next to nothing. The supervisor is this program started again
// from its own executable (/proc/self/exe), and so is the fallback where
// ptrace is refused (a seccomp profile, a debugger), which sets the limit
// on itself and becomes git: package child is that side.
//
// It knows nothing of git's commands: gitcmd decides what runs, under what
// limit, and which commands are supervised. Other systems have none of
// this; gitcmd starts git directly there.
package spawn
