// Package gitcmd is the only place in gitfleet that runs git. Every git
// process is built from a Cmd description and checked before it runs, as
// Gitaly's command descriptions are: the subcommand must be one of
// commands, each of its flags one that commands lists for it (a value, where
// a flag takes one, in the same word), and positional values (URLs, paths,
// revisions) come after the separator the table gives the subcommand ("--",
// or --end-of-options where "--" means "paths follow") and can never be read
// as options. The environment is hardened once (no prompts, no credential
// helpers, no hooks, no system or global configuration, a protocol
// allow-list, a timeout): its -c settings come after the caller's Config,
// and its variables after the caller's Env, so that git, which takes the
// last of each, keeps the hardening whatever a caller sets; and a caller's
// Env may name only the few variables env.go allows. Every process is
// bounded: its own process group, killed with gitfleet, a memory limit
// where the system has one (proc_*.go; on Linux, package spawn sets it
// before git's first instruction). git never looks for a repository
// where gitfleet happens to run: a command without a Dir runs in "/" with
// discovery stopped there, repositories are named by absolute --git-dir
// paths, and a bare repository is used only when named so
// (safe.bareRepository=explicit). Where git's connections may go is chosen
// when a Runner is built (New): through an egress policy (Through; a
// command that reaches a peer on this machine says so with Cmd.Peer and
// must name a loopback http URL), to an operator's own remotes only
// (Direct), or nowhere but this machine (LocalOnly). A Runner made without
// that choice runs nothing.
//
// It also reads what git says: refs (an upstream's listing under
// RefLimits, a mirror's stored refs, their Digest), failures (Error and
// its Class, and Public, the class anyone may see, in repostate's
// words), and the Retry-After of an upstream that throttles. It knows
// nothing of keys, nodes or the catalog.
package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
)

// DefaultProtocols are the transports git may use for upstreams.
const DefaultProtocols = "https:http:git:ssh"

// Runner runs git commands with a hardened environment. Build it with New:
// its fields are its own, and a Runner made otherwise (Runner{}) refuses
// to run anything.
type Runner struct {
	route Route
	opt   Options
}

// Options are the settings of a Runner besides its Route. Zero values are
// the defaults.
type Options struct {
	// Git is the git executable (default "git" from PATH).
	Git string
	// Timeout bounds each git process (default 10 minutes).
	Timeout time.Duration
	// Protocols is GIT_ALLOW_PROTOCOL (default DefaultProtocols). Add
	// "file" only for paths an operator gave (the catalog). A LocalOnly
	// runner allows "file" alone, whatever this says.
	Protocols string
	// MaxOutput bounds the captured stdout of Output (default 256 MiB).
	MaxOutput int64
	// MemoryLimit, when positive, bounds each git process's data segment
	// (RLIMIT_DATA, where the system can: see MemoryLimitSupported); 0: none.
	MemoryLimit int64
	// MaxTreeDepth, when positive, is passed as core.maxTreeDepth. Set it
	// only for a git that knows the setting (see Version).
	MaxTreeDepth int
	// TempDir is where the commands that talk to upstreams write curl's
	// trace of the headers (retryafter.go); default os.TempDir(). Give a
	// directory the process empties at its start (the mirror's tmp), so
	// that a trace a kill -9 left behind does not outlive the process.
	TempDir string
}

// New returns a Runner whose git processes connect as route says, with
// opt.
func New(route Route, opt Options) *Runner {
	if route.kind == unchosen {
		panic("gitcmd: New without a route: give Through(egress), Direct() or LocalOnly()")
	}
	return &Runner{route: route, opt: opt}
}

// Timeout is how long each git process may run (Options.Timeout, or its
// default).
func (r *Runner) Timeout() time.Duration { return r.timeout(&Cmd{}) }

// Cmd describes one git invocation.
type Cmd struct {
	// GitDir, when set, is passed as --git-dir. It must be absolute.
	GitDir string
	// Dir is the working directory of the process. Left empty, git runs in
	// neutralDir and finds no repository there; set it only where git must
	// discover a repository from a path (an operator's work tree).
	Dir string
	// Name is the subcommand, e.g. "fetch".
	Name string
	// Flags are options written by gitfleet's code, each one that commands
	// lists for Name: a flag that takes a value carries it in the same
	// word ("--depth=1").
	Flags []string
	// Args are positional values (URLs, paths, refspecs, revisions). They
	// come after the separator commands gives Name ("--", or
	// --end-of-options where "--" means "paths follow") and none may start
	// with "-".
	Args []string
	// Config are extra -c key=value settings. They come before the
	// runner's own (hardening), which git then reads last: a caller cannot
	// undo the hardening.
	Config []string
	// Env are extra environment variables (KEY=value), of the few a caller
	// may set (env.go). The runner's own (the protocol allow-list, no
	// prompts, no system or global configuration, the egress proxy) are set
	// after them and win.
	Env []string
	// Peer: the command reaches a gitfleet peer on this machine (a full
	// node's pull from an owner, through its loopback tunnel proxy), not an
	// upstream, so its connection does not go through the runner's Egress.
	// Its first argument must then be an http URL on a loopback address.
	Peer   bool
	Stdin  io.Reader
	Stdout io.Writer
	// Timeout overrides the runner's timeout when positive.
	Timeout time.Duration
}

// A flag's arity: whether it takes a value from the caller.
type arity uint8

const (
	// asWritten: the flag is allowed only exactly as the table writes it,
	// a fixed value included ("--template=", "--split=replace").
	asWritten arity = iota
	// valued: "--name=<value>", in one word, the value the caller's.
	valued
)

// command is what gitfleet may give one subcommand, as Gitaly's command
// descriptions: the flags it may take, and the separator before the
// positional arguments.
type command struct {
	flags map[string]arity
	// sep goes before Args: "--end-of-options" where "--" would mean
	// "paths follow" (rev-parse, diff-tree, ls-tree, read-tree, cat-file,
	// merge-base), "--" elsewhere. Empty: the subcommand is given no
	// positional arguments (revisions come on stdin).
	sep string
}

const (
	dashDash     = "--"
	endOfOptions = "--end-of-options"
)

// commands are the subcommands gitfleet may run and their flags: anything
// else is refused before git starts. A name of two words is a subcommand
// and its verb. Add a flag here when code needs it, never one that names a
// program to run (--upload-pack, --exec) or a configuration to read.
var commands = map[string]command{
	"version": {},
	"init": {sep: dashDash, flags: map[string]arity{
		"--bare": asWritten, "--quiet": asWritten, "--initial-branch": valued,
		"--template=": asWritten, // no template: its hooks would be copied in
	}},
	"clone": {sep: dashDash, flags: map[string]arity{"--bare": asWritten, "--quiet": asWritten}},
	"fetch": {sep: dashDash, flags: map[string]arity{
		"--quiet": asWritten, "--no-tags": asWritten, "--no-write-fetch-head": asWritten, "--no-auto-gc": asWritten,
		"--prune": asWritten, "--atomic": asWritten, "--stdin": asWritten, "--depth": valued, "--filter": valued,
	}},
	"ls-remote":    {sep: dashDash, flags: map[string]arity{"--heads": asWritten, "--tags": asWritten, "--symref": asWritten}},
	"upload-pack":  {sep: dashDash, flags: map[string]arity{"--stateless-rpc": asWritten, "--advertise-refs": asWritten, "--timeout": valued}},
	"for-each-ref": {sep: dashDash, flags: map[string]arity{"--format": valued, "--count": valued, "--points-at": valued}},
	"symbolic-ref": {sep: dashDash, flags: map[string]arity{"-q": asWritten}},
	"update-ref":   {sep: dashDash, flags: map[string]arity{"--stdin": asWritten, "-d": asWritten}},
	"config":       {sep: dashDash},
	"rev-parse": {sep: endOfOptions, flags: map[string]arity{
		"--verify": asWritten, "--quiet": asWritten, "--absolute-git-dir": asWritten,
	}},
	"cat-file": {sep: endOfOptions, flags: map[string]arity{
		"--batch": asWritten, "--buffer": asWritten, "--batch-check": valued, "-e": asWritten, "-p": asWritten,
	}},
	"diff-tree": {sep: endOfOptions, flags: map[string]arity{
		"-r": asWritten, "-z": asWritten, "-p": asWritten, "--no-renames": asWritten, "--no-commit-id": asWritten,
	}},
	"ls-tree": {sep: endOfOptions, flags: map[string]arity{"-r": asWritten, "-z": asWritten, "--full-tree": asWritten}},
	"rev-list": {flags: map[string]arity{
		"--objects": asWritten, "--all": asWritten, "--branches": asWritten, "--tags": asWritten, "--not": asWritten,
		"--stdin": asWritten, "--quiet": asWritten, "--count": asWritten, "--use-bitmap-index": asWritten,
		"--max-count": valued, "--max-parents": valued, "--exclude": valued,
	}},
	// catalog gen writes synthetic catalogs in one stream and checks them out.
	"fast-import": {flags: map[string]arity{"--quiet": asWritten, "--done": asWritten}},
	"read-tree":   {sep: endOfOptions, flags: map[string]arity{"--reset": asWritten, "-u": asWritten}},
	// pruning what the upstream dropped (mirror/prune.go) and pools (mirror/pool.go).
	"merge-base": {sep: endOfOptions, flags: map[string]arity{"--is-ancestor": asWritten, "--octopus": asWritten}},
	"repack": {flags: map[string]arity{
		"-a": asWritten, "-d": asWritten, "-b": asWritten, "-i": asWritten, "-l": asWritten, "-n": asWritten, "-q": asWritten,
		"--write-midx": asWritten, "--write-bitmap-index": asWritten, "--keep-unreachable": asWritten,
		"--geometric": valued, "--threads": valued,
	}},
	"prune": {flags: map[string]arity{"--expire": valued}},
	// keeping mirrors cheap to serve (mirror/maintain.go).
	"pack-refs": {flags: map[string]arity{"--all": asWritten}},
	"commit-graph write": {flags: map[string]arity{
		"--reachable": asWritten, "--no-progress": asWritten, "--split": asWritten, "--split=replace": asWritten,
	}},
}

// checkFlag refuses the flag f unless git name may take it.
func (c command) checkFlag(name, f string) error {
	if a, ok := c.flags[f]; ok && a == asWritten {
		return nil
	}
	k, _, hasValue := strings.Cut(f, "=")
	if c.flags[k] == valued { // asWritten is the zero value: an unknown k is not valued
		if hasValue {
			return nil
		}
		return fmt.Errorf("gitcmd: flag %q of git %s takes its value in the same word (%s=<value>)", f, name, k)
	}
	return fmt.Errorf("gitcmd: flag %q is not one git %s may take (see commands in package gitcmd)", f, name)
}

// hardening is applied to every command as -c settings.
var hardening = []string{
	"core.hooksPath=/dev/null",
	"credential.helper=",
	"http.followRedirects=false",
	"protocol.version=2",
	"http.lowSpeedLimit=1000",
	"http.lowSpeedTime=60",
	"core.askPass=false",
	"fetch.recurseSubmodules=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"core.fsync=committed",
	"advice.detachedHead=false",
	"transfer.bundleURI=false", // no bundle URIs an upstream advertises (git 2.41+; ignored before)
}

// neutralDir is where a command without a Dir runs: not the directory
// gitfleet was started from, whose .git/config (url.<base>.insteadOf, say)
// would otherwise apply to every upstream. "/" belongs to root, so git's
// ownership check refuses a repository there unless root made it.
const neutralDir = "/"

// Error is a failed git command. Its Class says what kind of failure it was.
type Error struct {
	Args     []string
	ExitCode int
	Stderr   string
	Class    Class
	Err      error
	// RetryAfter is what a throttling upstream's Retry-After asked for
	// (class throttled only; 0: nothing asked). See RetryAfterOf.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 500 {
		msg = msg[len(msg)-500:]
	}
	if (msg == "" || e.Class == ClassBlocked) && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s: %s", strings.Join(e.Args, " "), e.Class, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Class is a kind of git failure, for retries and reports.
type Class string

// The failure classes.
const (
	ClassOther     Class = "error"
	ClassTimeout   Class = "timeout"
	ClassNetwork   Class = "network"
	ClassNotFound  Class = "not-found"
	ClassAuth      Class = "auth"
	ClassTLS       Class = "tls"
	ClassThrottled Class = "throttled"
	ClassDisk      Class = "disk"
	// ClassLegal: the upstream answers HTTP 451, unavailable for legal
	// reasons (a takedown): treated as gone, not as a network error.
	ClassLegal Class = "legal"
	// ClassDeleted: the upstream answers HTTP 404 or 410 to git's smart
	// HTTP: the repository is not there (deleted, or private), as a
	// server says it, where ClassNotFound is any other "not found" (an
	// SSH server's words, a path that is no repository).
	ClassDeleted Class = "deleted"
	// The repository is over an operator's limit (see Limits in package
	// mirror): not retried until the limit or the upstream changes.
	ClassTooLarge    Class = "too-large"
	ClassTooManyRefs Class = "too-many-refs"
	// ClassBadObjects: the objects received (or stored) failed git's
	// checks: refused by fsck on the way in, or missing or corrupt on disk.
	ClassBadObjects Class = "bad objects"
)

// ClassOf returns the class of err (ClassOther for non-git errors).
func ClassOf(err error) Class {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Class
	}
	if egress.IsBlocked(err) {
		return ClassBlocked
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassTimeout
	}
	return ClassOther
}

func classify(stderr string, err error) Class {
	s := strings.ToLower(stderr)
	// git's own lines: a server's words (its answer's body, "remote: ...")
	// never decide which HTTP status it answered.
	own := strings.ToLower(withoutRemoteLines(stderr))
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		// curl's low-speed cut (http.lowSpeedTime): an upstream that
		// stalled, not one that could not be reached. Before the network
		// case, whose "unable to access" prefixes curl's message.
		strings.Contains(s, "operation too slow"), strings.Contains(s, "operation timed out"):
		return ClassTimeout
	case strings.Contains(s, "no space left") || strings.Contains(s, "disk quota") ||
		strings.Contains(s, "read-only file system"):
		return ClassDisk
	case strings.Contains(s, "out of memory") || strings.Contains(s, "cannot allocate memory"):
		// git hit --git-memory-limit: the repository needs more.
		return ClassTooLarge
	case strings.Contains(s, "fsck error") || strings.Contains(s, "missing blob") ||
		strings.Contains(s, "missing tree") || strings.Contains(s, "missing commit") ||
		strings.Contains(s, "missing tag") || strings.Contains(s, "is corrupt") ||
		strings.Contains(s, "object file") || strings.Contains(s, "bad object") ||
		strings.Contains(s, "did not send all necessary objects") || strings.Contains(s, "unable to read tree") ||
		strings.Contains(s, "to be a packfile") || strings.Contains(s, "does not match index") ||
		strings.Contains(s, "unknown object type"):
		return ClassBadObjects
	case strings.Contains(s, "error: 429") || strings.Contains(s, "error: 503") ||
		strings.Contains(s, "too many requests") || strings.Contains(s, "rate limit"):
		return ClassThrottled
	case strings.Contains(own, "error: 451") || strings.Contains(own, "unavailable for legal reasons"):
		return ClassLegal
	case strings.Contains(s, "returned error: 301") || strings.Contains(s, "returned error: 302") ||
		strings.Contains(s, "returned error: 303") || strings.Contains(s, "returned error: 307") ||
		strings.Contains(s, "returned error: 308"):
		// A redirect: gitfleet follows none (http.followRedirects=false),
		// wherever it leads, as the egress policy refuses it.
		return ClassBlocked
	case strings.Contains(own, "returned error: 404") || strings.Contains(own, "returned error: 410") || missingTarget(own):
		return ClassDeleted
	case strings.Contains(own, "repository not found") || strings.Contains(own, "does not appear to be a git repository") ||
		strings.Contains(own, "not found"):
		return ClassNotFound
	case strings.Contains(s, "authentication failed") || strings.Contains(s, "could not read username") ||
		strings.Contains(s, "could not read password") || strings.Contains(s, "terminal prompts disabled") ||
		strings.Contains(s, "error: 401") || strings.Contains(s, "error: 403") ||
		strings.Contains(s, "permission denied"):
		return ClassAuth
	case strings.Contains(s, "ssl") || strings.Contains(s, "certificate") || strings.Contains(s, "tls"):
		return ClassTLS
	case strings.Contains(s, "could not resolve host") || strings.Contains(s, "connection refused") ||
		strings.Contains(s, "failed to connect") || strings.Contains(s, "connection timed out") ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "unable to access") ||
		strings.Contains(s, "early eof") || strings.Contains(s, "the remote end hung up") ||
		strings.Contains(s, "couldn't connect"):
		return ClassNetwork
	}
	return ClassOther
}

// Redirected tells whether err is git's failure on an HTTP redirect
// (301, 302, 303, 307, 308), which gitfleet's git does not follow
// (http.followRedirects=false): git's own line, never a server's words.
func Redirected(err error) bool {
	var ge *Error
	if !errors.As(err, &ge) {
		return false
	}
	own := withoutRemoteLines(ge.Stderr)
	for _, code := range []string{"301", "302", "303", "307", "308"} {
		if strings.Contains(own, "returned error: "+code) {
			return true
		}
	}
	return false
}

// missingTarget tells whether git's own lines (lower-cased) say what its
// HTTP transport says of a 404: "fatal: repository '<url>' not found".
func missingTarget(own string) bool {
	for _, l := range strings.Split(own, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "fatal: repository '") && strings.HasSuffix(l, "' not found") {
			return true
		}
	}
	return false
}

// withoutRemoteLines is stderr without the lines a server wrote ("remote:
// ..."), which git copies from its answer.
func withoutRemoteLines(stderr string) string {
	lines := strings.Split(stderr, "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimLeft(l, "\r"), "remote:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func (r *Runner) timeout(c *Cmd) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	if r.opt.Timeout > 0 {
		return r.opt.Timeout
	}
	return 10 * time.Minute
}

func (r *Runner) argv(c *Cmd) ([]string, error) {
	desc, ok := commands[c.Name]
	if !ok {
		return nil, fmt.Errorf("gitcmd: subcommand %q is not allowed", c.Name)
	}
	if err := checkEnv(c.Name, c.Env); err != nil { // env.go
		return nil, err
	}
	args := make([]string, 0, 2*len(c.Config)+2*len(hardening)+len(c.Flags)+len(c.Args)+8)
	// The caller's settings first: git takes the last -c of a key, and the
	// hardening below must be it.
	for _, kv := range c.Config {
		if strings.HasPrefix(kv, "-") || !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("gitcmd: bad config setting %q", kv)
		}
		args = append(args, "-c", kv)
	}
	for _, kv := range hardening {
		args = append(args, "-c", kv)
	}
	if r.opt.MaxTreeDepth > 0 {
		args = append(args, "-c", fmt.Sprintf("core.maxTreeDepth=%d", r.opt.MaxTreeDepth))
	}
	if c.GitDir != "" || c.Dir == "" {
		// Every repository gitfleet works on is named by --git-dir (or, for
		// init and upload-pack, by an argument): a bare repository that git
		// would find by itself is never the one meant (git 2.38+).
		args = append(args, "-c", "safe.bareRepository=explicit")
	}
	if c.GitDir != "" {
		if !filepath.IsAbs(c.GitDir) {
			return nil, fmt.Errorf("gitcmd: git directory %q of git %s is not an absolute path", c.GitDir, c.Name)
		}
		args = append(args, "--git-dir="+c.GitDir)
	}
	args = append(args, strings.Fields(c.Name)...)
	for _, f := range c.Flags {
		if err := desc.checkFlag(c.Name, f); err != nil {
			return nil, err
		}
		args = append(args, f)
	}
	if len(c.Args) > 0 {
		if desc.sep == "" {
			return nil, fmt.Errorf("gitcmd: git %s is given no positional arguments (%q)", c.Name, c.Args[0])
		}
		args = append(args, desc.sep)
		for _, a := range c.Args {
			if a == "" || strings.HasPrefix(a, "-") {
				return nil, fmt.Errorf("gitcmd: argument %q of git %s may not be empty or start with '-'", a, c.Name)
			}
			args = append(args, a)
		}
	}
	return args, nil
}

// env is the environment of c's process: the caller's variables first, then
// the runner's, which os/exec keeps over the caller's of the same name.
func (r *Runner) env(c *Cmd) []string {
	protocols := r.opt.Protocols
	switch {
	case r.route.kind == localOnly:
		protocols = "file"
	case protocols == "":
		protocols = DefaultProtocols
	}
	env := append(slices.Clip(c.Env),
		"PATH="+os.Getenv("PATH"),
		"HOME=/nonexistent",
		"LC_ALL=C",
		"GIT_ALLOW_PROTOCOL="+protocols,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=false",
		"SSH_ASKPASS=false",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=30",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_OPTIONAL_LOCKS=0",
	)
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	if c.Dir == "" {
		env = append(env, "GIT_CEILING_DIRECTORIES="+neutralDir)
	}
	return env
}

// Run runs c. Stdout goes to c.Stdout (discarded when nil). On failure the
// error is an *Error carrying the tail of stderr and a Class.
func (r *Runner) Run(ctx context.Context, c Cmd) error {
	if r.route.kind == unchosen {
		return fmt.Errorf("gitcmd: git %s: the runner was not made by New, so where its connections may go was never chosen", c.Name)
	}
	args, err := r.argv(&c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout(&c))
	defer cancel()
	git := r.opt.Git
	if git == "" {
		git = "git"
	}
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = neutralDir
	}
	egressEnv, endEgress, err := r.beginEgress(&c)
	if err != nil {
		return err
	}
	traceEnv, endTrace := beginTrace(c.Name, r.opt.TempDir) // retryafter.go
	cmd.Env = append(append(r.env(&c), egressEnv...), traceEnv...)
	if c.Stdin != nil {
		// os/exec waits for its stdin copier even after the process died,
		// and a reader that never returns (a stalled HTTP body) would hang
		// Wait for ever: copy through our own pipe that we can abandon.
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("gitcmd: %w", err)
		}
		defer pw.Close()
		cmd.Stdin = pr
		go func() {
			_, _ = io.Copy(pw, c.Stdin)
			pw.Close()
		}()
		defer pr.Close()
	}
	cmd.Stdout = c.Stdout
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	// git starts helpers (remote-https, index-pack): start puts git in a
	// group of its own, to kill it whole. It also ties the child's life to
	// this process where the kernel can (Pdeathsig on Linux).
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	runErr := start(cmd, c.Name, r.opt.MemoryLimit)
	if runErr == nil {
		runErr = cmd.Wait()
	}
	refused := endEgress()
	if runErr == nil {
		endTrace(false)
		return nil
	}
	if ctx.Err() != nil {
		runErr = fmt.Errorf("%w (%v)", ctx.Err(), runErr)
	}
	ge := &Error{Args: append([]string{c.Name}, c.Args...), ExitCode: -1, Stderr: stderr.String(), Err: runErr}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		ge.ExitCode = ee.ExitCode()
	}
	ge.Class = classify(ge.Stderr, runErr)
	if refused != nil {
		ge.Class, ge.Err = ClassBlocked, refused
	}
	ge.RetryAfter = endTrace(ge.Class == ClassThrottled)
	return ge
}

// Output runs c and returns its stdout (bounded by MaxOutput).
func (r *Runner) Output(ctx context.Context, c Cmd) ([]byte, error) {
	max := r.opt.MaxOutput
	if max <= 0 {
		max = 256 << 20
	}
	var buf limitedBuffer
	buf.max = max
	c.Stdout = &buf
	err := r.Run(ctx, c)
	if err == nil && buf.over {
		return nil, fmt.Errorf("git %s: output larger than %d bytes", c.Name, max)
	}
	return buf.Bytes(), err
}

type limitedBuffer struct {
	bytes.Buffer
	max  int64
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if int64(b.Len()+len(p)) > b.max {
		b.over = true
		return 0, errors.New("output limit reached")
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
